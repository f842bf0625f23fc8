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
and every folder written into is a real folder (harness_bases/safe_files.py). Only regular
files are copied: a FIFO, socket or device the agent made there is skipped, never opened in a
way that could block. Copies stream in bounded chunks (holes kept), and a task whose files
hold more than SET_ASIDE_MAX_BYTES is refused before its turn starts (TooMuchToSetAside).
Blocking: call these off the event loop, through `off_loop` (its own few threads, so a slow
disk never holds up the server's other thread work), while no process of the session runs.
"""

from __future__ import annotations

import asyncio
import errno
import fnmatch
import functools
import json
import os
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ParamSpec, TypeVar

from harness_bases.safe_files import real_dir, remove, remove_if_present
from uhp_server.files.trees import remove_tree

ASIDE = "unkept-aside"  # in the session's folder, beside `home` and `workspace`
_FILES = "files"  # the copies, at their paths relative to the home
_STARTED_FROM = "started-from.json"  # the CLI conversation the task started from

# What one task's copy may hold (the files' sizes, holes included): past it the task is
# refused rather than filling the server's disk, outside any sandbox's own disk limit.
SET_ASIDE_MAX_BYTES = 1 << 30
# And in files: a CLI keeps a few per conversation; a million empty ones would hold a worker
# of the pool below for minutes without coming near the byte limit.
SET_ASIDE_MAX_FILES = 10_000
_CHUNK = 1 << 20  # bytes copied per call: what a copy holds in memory at most
# O_NONBLOCK: a FIFO swapped in after the lstat opens at once instead of waiting for a writer.
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_P = ParamSpec("_P")
_T = TypeVar("_T")
_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="uhp-unkept")


class TooMuchToSetAside(Exception):
    """The conversation files are more than a `store: false` task may set aside."""


async def off_loop(work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """work(...) on this module's own threads, not the event loop's default pool."""
    call = functools.partial(work, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_THREADS, call)


def set_aside(
    home: Path,
    patterns: tuple[str, ...],
    native_session_id: str | None,
    limit: int | None = None,
) -> str | None:
    """Copy what `patterns` match in `home` aside, before a `store: false` turn; returns the
    CLI conversation id the task started from. When a turn of the same task (parked on a
    question) set them aside already, that copy stands and its starting point is returned.
    Regular files only (links, FIFOs, sockets and devices are skipped); more than `limit`
    bytes in all (SET_ASIDE_MAX_BYTES unless told) raises TooMuchToSetAside, with nothing
    copied."""
    aside = home.parent / ASIDE
    if aside.is_dir():
        return _started_from(aside)
    limit = SET_ASIDE_MAX_BYTES if limit is None else limit
    found: dict[Path, os.stat_result] = {}
    for match in matches(home, patterns):
        for path, info in _regular(match):
            found[path] = info
            if len(found) > SET_ASIDE_MAX_FILES:
                raise TooMuchToSetAside(
                    f"The session's CLI conversation files are more than {SET_ASIDE_MAX_FILES}"
                    " files, more than a store: false task may set aside; run it with"
                    " store: true or in a new session."
                )
    total = sum(info.st_size for info in found.values())
    if total > limit:
        raise TooMuchToSetAside(
            f"The session's CLI conversation files hold {_mib(total)}, more than a "
            f"store: false task may set aside ({_mib(limit)}); run it with store: true "
            "or in a new session."
        )
    making = home.parent / f"{ASIDE}.partial"
    remove_tree(making)
    try:
        budget = limit
        for path in found:
            budget -= _copy_regular(path, making / _FILES / path.relative_to(home), budget)
        making.mkdir(mode=0o700, parents=True, exist_ok=True)
        (making / _STARTED_FROM).write_text(json.dumps({"native_session_id": native_session_id}))
    except BaseException:
        remove_tree(making)
        raise
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
    for source, _ in _regular(copies):
        relative = source.relative_to(copies)
        folder = real_dir(home, str(relative.parent)) if relative.parent.parts else home
        target = folder / relative.name
        remove_if_present(target)  # the copy is made afresh: O_EXCL, never through a link
        _copy_regular(source, target, budget=None)
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


def _regular(path: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """path's regular files with their lstat: path itself, or a real folder's at any depth.
    Links and every other kind of file (FIFOs, sockets, devices) are left out: a CLI keeps
    its conversation in plain files, and opening a FIFO could wait forever."""
    try:
        info = path.lstat()
    except OSError:
        return
    if stat.S_ISREG(info.st_mode):
        yield path, info
    elif stat.S_ISDIR(info.st_mode):
        for folder, _, names in os.walk(path):  # (never into a link: followlinks=False)
            for name in names:
                yield from _regular(Path(folder, name))


def _copy_regular(path: Path, to: Path, budget: int | None) -> int:
    """Copy the regular file at path to a new file `to` (its mode and times too), a chunk at
    a time and keeping its holes; returns its size. Nothing is copied when path is, or has
    been swapped for, anything else; more than `budget` bytes raises TooMuchToSetAside."""
    try:
        source = os.open(path, _READ)
    except OSError:  # gone, or a link planted since
        return 0
    try:
        info = os.fstat(source)
        if not stat.S_ISREG(info.st_mode):
            return 0
        if budget is not None and info.st_size > budget:
            raise TooMuchToSetAside(f"{path.name} grew past what may be set aside")
        to.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = os.open(to, _CREATE, 0o600)
        try:
            for start, end in _data_extents(source, info.st_size):
                _copy_range(source, target, start, end)
            os.ftruncate(target, info.st_size)  # a trailing hole stays a hole
            # Permission bits only: a copy the root server makes must never carry the
            # agent's setuid, setgid or sticky bit (it would be a setuid-root file).
            os.fchmod(target, stat.S_IMODE(info.st_mode) & 0o777)
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(target)
        return info.st_size
    finally:
        os.close(source)


def _data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """Where the file holds data, as (start, end) offsets; the whole file when the file
    system cannot tell holes apart."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        except OSError as error:
            if error.errno == errno.ENXIO:  # no data past offset
                return
            yield offset, size
            return
        if start >= size:
            return
        yield start, end
        offset = end


def _copy_range(source: int, target: int, start: int, end: int) -> None:
    """Bytes start..end of source to the same place in target, _CHUNK at most at a time
    (in the kernel where it can, else through a buffer of that size)."""
    offset = start
    while offset < end:
        count = min(_CHUNK, end - offset)
        try:
            done = os.copy_file_range(source, target, count, offset, offset)
        except OSError:  # not between these file systems: a bounded read and write
            data = os.pread(source, count, offset)
            done = os.pwrite(target, data, offset) if data else 0
        if done == 0:  # the file shrank under us
            return
        offset += done


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB"


def _started_from(aside: Path) -> str | None:
    try:
        value = json.loads((aside / _STARTED_FROM).read_text()).get("native_session_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None
