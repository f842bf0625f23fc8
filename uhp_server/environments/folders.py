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
    """Takes every write bit off the version's files and directories (links are left: their
    mode means nothing). The mount a session gets is read-only besides; this keeps a build's
    own processes and the server from changing it afterwards."""
    for here, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            _without_write(Path(here) / name)
    _without_write(folder)


def _without_write(path: Path) -> None:
    info = os.lstat(path)
    if not stat.S_ISLNK(info.st_mode):
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~WRITE_BITS)


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
