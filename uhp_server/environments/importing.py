"""A whole project at once (Environments §3.1): an archive (zip, or tar, compressed or not) or
a fetched git repository, landed in the source.

Members that must not land are dropped and counted in `skipped`, never written: links (of
either kind), devices and pipes, absolute names and names with a `..` segment. A single
directory wrapping everything (a repository archive's shape) is stripped. The bytes are
counted as they are extracted, not as the archive declares them, so a zip bomb stops at the
limit (`TooLarge`) rather than at the disk's end; so does an archive of too many members.

Everything is extracted into a staging folder first, then landed in one step (a swap with
`replace`, else moved over what is there), so a refused import leaves the source as it was.
File work: callers run it on a thread.
"""

from __future__ import annotations

import contextlib
import functools
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from uhp_server.environments.names import Invalid
from uhp_server.environments.source import (
    MAX_DEPTH,
    MAX_PATH,
    MAX_SEGMENT,
    Size,
    SourceTree,
    TooLarge,
    size_of,
)

CHUNK = 1024 * 1024
EXECUTABLE = 0o100


@dataclass(frozen=True)
class ImportLimits:
    max_file_bytes: int  # one file, as extracted
    max_bytes: int  # every file together, as extracted (and an archive's own size)
    max_files: int  # members of an archive, or files of a repository


@dataclass(frozen=True)
class ImportResult:
    written: int  # files written
    skipped: int  # members dropped: links, escapes, special files
    count: int  # the source's files afterwards
    bytes: int  # and their bytes


class _Contents(Protocol):
    """A member's bytes, read a chunk at a time, closed when done."""

    def read(self, size: int = -1, /) -> bytes: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> Any: ...


@dataclass(frozen=True)
class _Member:
    kind: str  # "zip", "tar", "folder": whose reading errors are the archive's
    parts: tuple[str, ...]
    is_dir: bool
    executable: bool
    open: Callable[[], _Contents]


@dataclass
class _Staged:
    folder: Path
    written: int
    skipped: int


# What reading a damaged archive raises, besides its module's own errors: a bad CRC, a
# corrupt deflate or gzip stream, a truncated one, an encrypted member, an unsupported method.
_BROKEN = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    tarfile.TarError,
    RuntimeError,
    NotImplementedError,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    OSError,
    ValueError,
)


Fits = Callable[[Size], None]  # raises (TooLarge) when the source would not fit afterwards


def _fits_anything(_after: Size) -> None:
    return None


def import_archive(
    archive: Path,
    tree: SourceTree,
    limits: ImportLimits,
    replace: bool,
    fits: Fits = _fits_anything,
) -> ImportResult:
    """Lands the zip or tar at `archive` in the source; Invalid when it is neither, or when
    it is one this server cannot read (damaged, encrypted, a method it does not know)."""
    if zipfile.is_zipfile(archive):
        with _reading("zip"):
            opened = zipfile.ZipFile(archive)
        with opened:
            staged = _stage(_zip_members(opened), tree, limits)
        return _land(staged, tree, replace, fits)
    try:
        opened_tar = tarfile.open(archive, "r:*")  # noqa: SIM115 (closed by the with below)
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError):
        raise Invalid("The body is neither a zip nor a tar archive.") from None
    with opened_tar:
        staged = _stage(_tar_members(opened_tar), tree, limits)
    return _land(staged, tree, replace, fits)


@contextlib.contextmanager
def _reading(kind: str) -> Iterator[None]:
    """An error reading the archive (never writing the staging folder: that is the
    server's) as Invalid, saying why."""
    try:
        yield
    except (Invalid, TooLarge):
        raise
    except _BROKEN as exc:
        raise Invalid(
            f"The {kind} archive cannot be read (damaged, encrypted or of a kind this server "
            f"does not read): {str(exc)[:200] or type(exc).__name__}."
        ) from None


def import_folder(
    folder: Path,
    tree: SourceTree,
    limits: ImportLimits,
    replace: bool,
    fits: Fits = _fits_anything,
) -> ImportResult:
    """Lands a fetched repository's files (its `.git` left out) in the source."""
    staged = _stage(_folder_members(folder), tree, limits, strip_wrapper=False)
    return _land(staged, tree, replace, fits)


# -- members ----------------------------------------------------------------------------------
def _parts(name: str) -> tuple[str, ...] | None:
    """The member's path segments; None for one that must not land (absolute, `..`)."""
    if "\x00" in name or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return None
    parts = tuple(part for part in name.replace("\\", "/").split("/") if part not in ("", "."))
    if any(part == ".." for part in parts) or len(parts) > MAX_DEPTH:
        return None
    encoded = [len(part.encode("utf-8", "surrogatepass")) for part in parts]
    if any(size > MAX_SEGMENT for size in encoded) or sum(encoded) + len(parts) > MAX_PATH:
        raise Invalid(
            f"A member's name is longer than this server takes ({MAX_SEGMENT} bytes a "
            f"segment, {MAX_PATH} in all): {name[:80]!r}..."
        )
    return parts


def _zip_members(archive: zipfile.ZipFile) -> Iterator[_Member | None]:
    with _reading("zip"):
        infos = archive.infolist()
    for info in infos:
        mode = info.external_attr >> 16
        kind = stat.S_IFMT(mode)
        parts = _parts(info.filename)
        special = kind not in (0, stat.S_IFREG, stat.S_IFDIR)  # a link, a device, a pipe
        if parts is None or special:
            yield None
        elif parts:
            yield _Member(
                "zip",
                parts,
                info.is_dir(),
                bool(mode & EXECUTABLE),
                functools.partial(archive.open, info),
            )


def _tar_members(archive: tarfile.TarFile) -> Iterator[_Member | None]:
    members = iter(archive)
    while True:
        with _reading("tar"):
            info = next(members, None)
        if info is None:
            return
        parts = _parts(info.name)
        if parts is None or not (info.isfile() or info.isdir()):
            yield None
        elif parts:
            yield _Member(
                "tar",
                parts,
                info.isdir(),
                bool(info.mode & EXECUTABLE),
                functools.partial(_tar_open, archive, info),
            )


def _tar_open(archive: tarfile.TarFile, info: tarfile.TarInfo) -> _Contents:
    opened = archive.extractfile(info)
    if opened is None:
        raise Invalid("A member of the archive could not be read.")
    return opened


def _folder_members(folder: Path) -> Iterator[_Member | None]:
    for here, dirs, files in os.walk(folder):
        base = Path(here)
        if base == folder and ".git" in dirs:
            dirs.remove(".git")
        for name in [*dirs, *files]:
            path = base / name
            info = os.lstat(path)
            parts = path.relative_to(folder).parts
            if stat.S_ISDIR(info.st_mode):
                yield _Member("folder", parts, True, False, _no_contents)
            elif stat.S_ISREG(info.st_mode):
                executable = bool(info.st_mode & EXECUTABLE)
                opener = functools.partial(_read_file, path)
                yield _Member("folder", parts, False, executable, opener)
            else:
                yield None


def _no_contents() -> _Contents:
    raise AssertionError("a directory has no contents to read")


def _read_file(path: Path) -> _Contents:
    return path.open("rb")


# -- staging ----------------------------------------------------------------------------------
def _stage(
    members: Iterator[_Member | None],
    tree: SourceTree,
    limits: ImportLimits,
    strip_wrapper: bool = True,
) -> _Staged:
    kept: list[_Member] = []
    skipped = 0
    for member in members:
        if member is None:
            skipped += 1
            continue
        kept.append(member)
        if len(kept) > limits.max_files:
            raise TooLarge(
                f"The import holds more than {limits.max_files} members.",
                limits.max_bytes,
                limits.max_files,
            )
    if strip_wrapper:
        kept = _unwrapped(kept)
    tree.scratch.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=tree.scratch, prefix="import-"))
    try:
        written = _extract(kept, folder, limits)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _Staged(folder, written, skipped)


def _unwrapped(members: list[_Member]) -> list[_Member]:
    """Without a single directory that wraps every member, when there is one."""
    tops = {member.parts[0] for member in members}
    if len(tops) != 1 or any(len(m.parts) == 1 and not m.is_dir for m in members):
        return members
    return [
        _Member(m.kind, m.parts[1:], m.is_dir, m.executable, m.open)
        for m in members
        if len(m.parts) > 1
    ]


def _extract(members: list[_Member], folder: Path, limits: ImportLimits) -> int:
    total = written = 0
    for member in members:
        target = folder.joinpath(*member.parts)
        if member.is_dir:
            _clear_for(target, directory=True)
            target.mkdir(parents=True, exist_ok=True)
            continue
        _clear_for(target, directory=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        source = _open(member)
        with source, open(target, "wb") as sink:
            while chunk := _read(member.kind, source):
                size += len(chunk)
                total += len(chunk)
                if size > limits.max_file_bytes:
                    raise TooLarge(
                        f"A file of the import is larger than {limits.max_file_bytes} bytes.",
                        limits.max_file_bytes,
                    )
                if total > limits.max_bytes:
                    raise TooLarge(
                        f"The import holds more than {limits.max_bytes} bytes.", limits.max_bytes
                    )
                sink.write(chunk)
        os.chmod(target, 0o755 if member.executable else 0o644)
        written += 1
    return written


def _open(member: _Member) -> _Contents:
    if member.kind == "folder":
        return member.open()  # the server's own disk: its errors are the server's
    with _reading(member.kind):
        return member.open()


def _read(kind: str, source: _Contents) -> bytes:
    if kind == "folder":
        return source.read(CHUNK)  # the server's own disk: its errors are the server's
    with _reading(kind):
        return source.read(CHUNK)


def _clear_for(target: Path, directory: bool) -> None:
    """A later member of another kind at the same path (or below a file) wins."""
    for step in [*reversed(target.parents), target]:
        if step.is_symlink():
            step.unlink()
        elif step == target and step.exists() and step.is_dir() != directory:
            shutil.rmtree(step) if step.is_dir() else step.unlink()
        elif step != target and step.is_file():
            step.unlink()


# -- landing ----------------------------------------------------------------------------------
def _land(staged: _Staged, tree: SourceTree, replace: bool, fits: Fits) -> ImportResult:
    try:
        fits(_after(staged.folder, tree.root, replace))
        if replace or not tree.root.exists():
            _swap(staged.folder, tree.root)
        else:
            _merge(staged.folder, tree.root)
    finally:
        shutil.rmtree(staged.folder, ignore_errors=True)
    size = size_of(tree.root)
    return ImportResult(staged.written, staged.skipped, size.count, size.bytes)


def _after(folder: Path, root: Path, replace: bool) -> Size:
    """What the source would hold once the staged files land: theirs alone with `replace`,
    else what is there now, less the files they replace, plus theirs."""
    staged = size_of(folder)
    if replace or not root.exists():
        return staged
    now = size_of(root)
    count, total = now.count + staged.count, now.bytes + staged.bytes
    for here, _dirs, files in os.walk(folder):
        relative = Path(here).relative_to(folder)
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(root / relative / name)
                if stat.S_ISREG(info.st_mode):
                    count, total = count - 1, total - info.st_size
    return Size(count, total)


def _swap(folder: Path, root: Path) -> None:
    old = root.with_name(root.name + ".replaced")
    shutil.rmtree(old, ignore_errors=True)
    if root.exists():
        os.replace(root, old)
    os.replace(folder, root)
    shutil.rmtree(old, ignore_errors=True)


def _merge(folder: Path, root: Path) -> None:
    """Moves the staged files over the source: a file replaces what is at its path."""
    for here, dirs, files in os.walk(folder):
        base = Path(here)
        relative = base.relative_to(folder)
        for name in dirs:
            target = root / relative / name
            if target.exists() and not target.is_dir():
                target.unlink()
            target.mkdir(exist_ok=True)
        for name in files:
            target = root / relative / name
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(base / name, target)
