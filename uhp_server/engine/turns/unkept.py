"""A `store: false` task leaves nothing of its conversation in the agent's home.

The CLI keeps its own record of every turn in the session's agent home (transcripts, history
files, logs, state databases: where, each base declares as `conversation_paths`, globs
relative to the home). Before a `store: false` task's first turn runs, what those paths hold
is copied aside, into the session's folder beside the home (never mounted in a sandbox); when
the task ends, they are put back as they were, so the session's kept conversation goes on
from where it stood and the unkept turn is gone. A turn parked on a question keeps its
conversation until its task ends: the answer's turn resumes it, and puts the paths back when
it ends; a kept turn finding paths still set aside (a parked task that was never answered, a
crash) puts them back before it starts.

The agent could have planted links anywhere in its home: no link is followed, read or made,
and every folder written into is a real folder (harness_bases/safe_files.py). Blocking: call
these off the event loop, while no process of the session runs.
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
from pathlib import Path

from harness_bases.safe_files import real_dir, remove, write_file
from uhp_server.files.trees import remove_tree

ASIDE = "unkept-aside"  # in the session's folder, beside `home` and `workspace`
_FILES = "files"  # the copies, at their paths relative to the home
_STARTED_FROM = "started-from.json"  # the CLI conversation the task started from


def set_aside(home: Path, patterns: tuple[str, ...], native_session_id: str | None) -> str | None:
    """Copy what `patterns` match in `home` aside, before a `store: false` turn; returns the
    CLI conversation id the task started from. When a turn of the same task (parked on a
    question) set them aside already, that copy stands and its starting point is returned."""
    aside = home.parent / ASIDE
    if aside.is_dir():
        return _started_from(aside)
    making = home.parent / f"{ASIDE}.partial"
    remove_tree(making)
    for path in matches(home, patterns):
        _copy_regular(path, making / _FILES / path.relative_to(home))
    making.mkdir(mode=0o700, parents=True, exist_ok=True)
    (making / _STARTED_FROM).write_text(json.dumps({"native_session_id": native_session_id}))
    os.replace(making, aside)  # whole or not at all: a crash leaves no half-made copy
    return native_session_id


def set_aside_pending(home: Path) -> bool:
    """Whether a `store: false` task's copy is still waiting to be put back."""
    return (home.parent / ASIDE).is_dir()


def put_back(home: Path, patterns: tuple[str, ...]) -> str | None:
    """Replace what `patterns` match in `home` with the copy set aside, and drop the copy;
    returns the CLI conversation id the task started from (None too when nothing was set
    aside)."""
    aside = home.parent / ASIDE
    if not aside.is_dir():
        return None
    started_from = _started_from(aside)
    for path in matches(home, patterns):
        if path.is_dir() and not path.is_symlink():
            remove_tree(path)
        else:
            remove(path)
    copies = aside / _FILES
    for folder, _, names in os.walk(copies):
        relative = Path(folder).relative_to(copies)
        target = real_dir(home, str(relative)) if relative.parts else home
        for name in names:
            source = Path(folder, name)
            info = source.stat()
            write_file(target / name, source.read_bytes(), stat.S_IMODE(info.st_mode))
            os.utime(target / name, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)
    remove_tree(aside)
    return started_from


def matches(home: Path, patterns: tuple[str, ...]) -> list[Path]:
    """What each pattern names under home, one path segment at a time (`*` stays within a
    segment): a folder on the way is entered only when it is a real folder, never a link."""
    found: list[Path] = []
    for pattern in patterns:
        level = [home]
        segments = Path(pattern).parts
        for depth, segment in enumerate(segments):
            last = depth == len(segments) - 1
            level = [
                Path(entry.path)
                for folder in level
                for entry in _entries(folder)
                if fnmatch.fnmatchcase(entry.name, segment)
                and (last or entry.is_dir(follow_symlinks=False))
            ]
        found.extend(path for path in level if path not in found)
    return found


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _copy_regular(path: Path, to: Path) -> None:
    """Copy a regular file, or a real folder's regular files at any depth; links and other
    kinds of file are left out (a CLI keeps its conversation in plain files)."""
    if path.is_symlink():
        return
    if path.is_dir():
        for folder, _, names in os.walk(path):  # (never into a link: followlinks=False)
            for name in names:
                inner = Path(folder, name)
                _copy_regular(inner, to / inner.relative_to(path))
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # gone, or a link planted since
        return
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode):
            return
        data = source.read()
    to.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    to.write_bytes(data)
    os.chmod(to, stat.S_IMODE(info.st_mode))
    os.utime(to, ns=(info.st_atime_ns, info.st_mtime_ns))


def _started_from(aside: Path) -> str | None:
    try:
        value = json.loads((aside / _STARTED_FROM).read_text()).get("native_session_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None
