"""What a rebuild reuses from an earlier version of the same environment: an installed tree
(.venv, node_modules, apt/) whose inputs were the same, found by the key it was made with.

A tree's key digests what decides its contents: the manifests, the declared specs, where it
is mounted (a virtual environment and npm's bin scripts hold absolute paths) and the system
it was made on (the interpreter, Node, the image). `pip install .` installs the project's own
code too, so with a pyproject.toml the key covers every file of the source. The keys are the
server's: kept in the version's notes (EnvironmentLayout.build_notes), beside the versions,
where no build's agent can write, never in the tree the agent wrote.

Versions are read-only once built (the chapter makes them so, and sessions mount them
read-only), so a new version may share an earlier one's files by hard links: nothing writes
either copy afterwards. That holds only when the server runs as root: make_read_only then
gives every file to root, and a later build's agent, which owns nothing of it, cannot put a
write bit back on a shared inode. A server that is not root leaves the files the agent's
(the same user), so its rebuilds always copy. The one step of a build that could write into
a reused tree is the owner's setup.sh; when the project has one the tree is copied too. A
copy keeps sparse files' holes and counts every file's size against the build's disk limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from uhp_server.environments.building.host_files import read_regular

KEY_SUFFIX = ".key"  # in a version's notes: <tree>.key, the key the tree was made with
# Trees of the version that the source digest leaves out (they are what builds make).
_MADE = frozenset({".venv", "node_modules", "apt", ".git", "__pycache__"})


def key(**parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def file_digest(folder: Path, names: Iterable[str]) -> dict[str, str]:
    """The digest of each named file at the folder's root that exists."""
    return {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in names
        if (folder / name).is_file()
    }


def source_digest(folder: Path) -> str:
    """Every file of the source (not what builds make), paths and contents."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _MADE)
        for name in sorted(files):
            path = Path(root, name)
            digest.update(str(path.relative_to(folder)).encode() + b"\0")
            if path.is_file() and not path.is_symlink():
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class Reused:
    version: int
    linked: bool  # hard links (else a copy)


def may_link(*, setup_sh: bool, root: bool) -> bool:
    """Whether a reused tree may share the earlier version's inodes: only on a root server
    (the earlier files are root's and read-only) and without a setup.sh (which may write)."""
    return root and not setup_sh


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def earlier_tree(folder: Path, notes: Path, tree: str, tree_key: str) -> tuple[int, Path] | None:
    """The newest earlier version (a sibling of `folder`, named by its number) whose `tree`
    was made with `tree_key`, as its notes (siblings of `notes`) say."""
    try:
        this = int(folder.name)
        siblings = [int(p.name) for p in notes.parent.iterdir() if p.name.isdigit()]
    except (OSError, ValueError):
        return None
    for number in sorted((n for n in siblings if n < this), reverse=True):
        made_with = read_regular(notes.parent, str(number), tree + KEY_SUFFIX, cap=1024)
        candidate = folder.parent / str(number) / tree
        # The version and its tree real folders: a link is never copied from.
        real = _is_folder(candidate.parent) and _is_folder(candidate)
        if made_with == tree_key.encode() and real:
            return number, candidate
    return None


def reuse(
    folder: Path, notes: Path, tree: str, tree_key: str, *, link: bool, disk_bytes: int
) -> Reused | None:
    """Put an earlier version's `tree` made with `tree_key` into `folder` (hard links when
    `link`, falling back to a copy across filesystems); None when there is none, or when a
    copy would take more than `disk_bytes` (0: no limit; the step then builds the tree and
    the disk watch stops it). A tree half-placed (the earlier version removed meanwhile) is
    removed again."""
    found = earlier_tree(folder, notes, tree, tree_key)
    if found is None:
        return None
    number, source = found
    target = folder / tree
    _remove(target)
    try:
        if link:
            try:
                shutil.copytree(source, target, symlinks=True, copy_function=os.link)
            except shutil.Error:
                _remove(target)
                link = False
        if not link:
            if disk_bytes and apparent_size(source) > disk_bytes:
                return None
            shutil.copytree(source, target, symlinks=True, copy_function=_SparseCopy(disk_bytes))
    except (OSError, shutil.Error):
        _remove(target)
        return None
    return Reused(number, link)


def _remove(path: Path) -> None:
    """Whatever is at `path` (a folder, or a link or file an agent put there), not followed."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def apparent_size(folder: Path) -> int:
    """Every regular file's size (st_size: a sparse file's holes too), links not followed."""
    total = 0
    for here, _dirs, files in os.walk(folder):
        for name in files:
            info = os.lstat(os.path.join(here, name))
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


class _SparseCopy:
    """copytree's copy function: regular files only (a FIFO or device is left out, never
    opened for reading), their data written and their holes left holes, the written sizes
    counted against `disk_bytes` (0: none)."""

    def __init__(self, disk_bytes: int) -> None:
        self.left = disk_bytes or None

    def __call__(self, source: str, target: str) -> None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(source, flags)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return
            if self.left is not None:
                self.left -= info.st_size
                if self.left < 0:
                    raise OSError(f"{source}: the copy would pass the build's disk limit")
            out = os.open(
                target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            try:
                _copy_data(fd, out, info.st_size)
                os.fchmod(out, stat.S_IMODE(info.st_mode))
            finally:
                os.close(out)
        finally:
            os.close(fd)


def _copy_data(fd: int, out: int, size: int) -> None:
    """The data segments of `fd` into `out` at the same offsets (SEEK_DATA/SEEK_HOLE), then
    the size: what lay in holes stays a hole."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: only a hole is left
            break
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        while start < end:
            chunk = os.pread(fd, min(1 << 20, end - start), start)
            if not chunk:
                break
            os.pwrite(out, chunk, start)
            start += len(chunk)
        offset = end
    os.ftruncate(out, size)


def stamp(folder: Path, notes: Path, tree: str, tree_key: str) -> None:
    """Note (once its step succeeded) that the version's `tree` was made with `tree_key`."""
    if not _is_folder(folder / tree):
        return
    notes.mkdir(parents=True, exist_ok=True)
    (notes / (tree + KEY_SUFFIX)).write_text(tree_key)
