"""A version's folder on disk: the source snapshotted into it, made read-only once built, and
removed (a deleted environment, a collected version). File work: callers run it on a thread.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

# Dependency folders that arrive with the files are not what a session gets: the build
# installs its own from the manifests (Environments §3.1).
DEPENDENCY_FOLDERS = frozenset({"node_modules", ".venv"})
WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def snapshot(source: Path, version: Path) -> None:
    """Copies the source into the (new) version's folder, without dependency folders and
    without anything that is neither a regular file nor a directory."""
    version.mkdir(parents=True, exist_ok=False)
    if not source.exists():
        return
    for here, dirs, files in os.walk(source):
        base = Path(here)
        into = version / base.relative_to(source)
        dirs[:] = sorted(name for name in dirs if name not in DEPENDENCY_FOLDERS)
        for name in dirs:
            if stat.S_ISDIR(os.lstat(base / name).st_mode):
                (into / name).mkdir()
        for name in files:
            if stat.S_ISREG(os.lstat(base / name).st_mode):
                shutil.copy2(base / name, into / name, follow_symlinks=False)


def make_read_only(folder: Path) -> None:
    """Takes every write bit off the version's files and directories, and (a root server)
    gives them to root: the build ran as the principal's agent, which owned what it wrote,
    and an owner may put a write bit back. A later build of the environment shares this
    version's unchanged trees by hard links (building/reuse.py), so while the agent owned
    them it could change this version from there. Setuid, setgid and sticky bits go; whatever
    the owner could read or run, every session's agent can (links are left: their mode means
    nothing). The mount a session gets is read-only besides."""
    to_root = os.geteuid() == 0
    for here, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            _seal(Path(here) / name, to_root)
    _seal(folder, to_root)


def _seal(path: Path, to_root: bool) -> None:
    if to_root:
        os.lchown(path, 0, 0)
    info = os.lstat(path)
    if not stat.S_ISLNK(info.st_mode):
        os.chmod(path, read_only_mode(info.st_mode))


def read_only_mode(mode: int) -> int:
    """rwx for the owner becomes r-x for everyone, minus every write and special bit."""
    if stat.S_ISDIR(mode):
        return 0o555
    owner = stat.S_IMODE(mode) & stat.S_IRWXU
    readable = 0o444 if owner & stat.S_IRUSR else 0
    runnable = 0o111 if owner & stat.S_IXUSR else 0
    return (stat.S_IMODE(mode) & 0o777 & ~WRITE_BITS) | readable | runnable


def remove_folder(folder: Path) -> None:
    """Removes a folder a build made read-only: its directories writable again first."""
    if not folder.exists():
        return
    for here, dirs, _files in os.walk(folder):
        for name in dirs:
            path = Path(here) / name
            if not path.is_symlink():
                os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | stat.S_IRWXU)
    os.chmod(folder, stat.S_IMODE(os.lstat(folder).st_mode) | stat.S_IRWXU)
    shutil.rmtree(folder)
