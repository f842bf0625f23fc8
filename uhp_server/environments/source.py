"""An environment's source on disk (Environments §3): the project as the owner put it in, one
file per request or a whole import, edited by path.

Every path a client names is confined to the source's root here, whatever the door made of
it: relative, no `.` or `..` segment, no NUL or backslash, and every existing step on the way
a real directory (never a link: nothing under the source is one, and lstat is what is asked).
A write lands in a temporary file beside the source and is renamed into place, so a reader
never sees half a file and a refused write leaves nothing behind. All of this is file work:
callers run it on a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from uhp_server.environments.names import Invalid

MAX_PATH = 1024  # bytes of a whole path, UTF-8
MAX_SEGMENT = 255  # bytes of one segment: what a Linux file system takes for a name
MAX_DEPTH = 64


class TooLarge(Exception):
    """A file or an import over a limit (file_too_large): `max_bytes`, and `max_files` for
    an import of too many members."""

    def __init__(self, message: str, max_bytes: int, max_files: int | None = None) -> None:
        super().__init__(message)
        self.max_bytes = max_bytes
        self.max_files = max_files


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the root, with `/`
    dir: bool
    bytes: int
    mtime: int  # Unix seconds


@dataclass(frozen=True)
class Size:
    """The source's size: files (not directories) and their bytes."""

    count: int
    bytes: int


def relative_parts(path: str) -> tuple[str, ...]:
    """The path's segments; Invalid for one that escapes the root, is no plain path or is
    longer than a file system takes (refused here, before the disk is asked)."""
    if not isinstance(path, str) or "\x00" in path or "\\" in path:
        raise Invalid("The path must be a plain relative path inside the environment.")
    if _bytes(path) > MAX_PATH:
        raise Invalid(f"The path is longer than {MAX_PATH} bytes.")
    if path.startswith("/"):
        raise Invalid("The path must be relative to the environment's root.")
    parts = tuple(part for part in path.strip("/").split("/"))
    if not parts or parts == ("",) or any(part in ("", ".", "..") for part in parts):
        raise Invalid("The path must not be empty nor hold `.`, `..` or an empty segment.")
    if len(parts) > MAX_DEPTH:
        raise Invalid(f"The path is deeper than {MAX_DEPTH} directories.")
    if any(_bytes(part) > MAX_SEGMENT for part in parts):
        raise Invalid(f"A segment of the path is longer than {MAX_SEGMENT} bytes.")
    return parts


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def refusal(exc: OSError) -> Invalid | None:
    """What a file operation's error says to the client, when the client's path caused it
    (a name the file system refuses); None when it is the server's storage failing."""
    if exc.errno in (errno.ENAMETOOLONG, errno.EILSEQ, errno.EINVAL):
        return Invalid("The file system does not take that path.")
    if exc.errno in (errno.ENOTDIR, errno.ELOOP):
        return Invalid("A step of the path is not a directory.")
    if exc.errno == errno.EISDIR:
        return Invalid("The path names a directory.")
    return None


def _kind(target: Path) -> int | None:
    """The file type bits of what is at `target` (not followed), None when nothing is."""
    try:
        return stat.S_IFMT(os.lstat(target).st_mode)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise Invalid("A step of the path is a file, not a directory.") from None
    except OSError as exc:
        raise refusal(exc) or exc from None


class SourceTree:
    """The files of one environment's source, rooted at `root` (layout.source)."""

    def __init__(self, root: Path, scratch: Path) -> None:
        self.root = root
        self.scratch = scratch  # beside the root, on its file system: writes in progress

    # -- paths ------------------------------------------------------------------------------
    def locate(self, path: str) -> Path:
        """Where `path` is, every existing step on the way a directory (never a link)."""
        parts = relative_parts(path)
        here = self.root
        for part in parts[:-1]:
            here = here / part
            kind = _kind(here)
            if kind is None:
                return self.root.joinpath(*parts)
            if kind != stat.S_IFDIR:
                raise Invalid("A step of the path is not a directory.")
        return self.root.joinpath(*parts)

    def existing(self, path: str) -> tuple[Path, bool]:
        """The file or directory at `path` and whether it is a directory; FileNotFoundError
        when there is none, Invalid when it is anything else (a link, a device, a pipe)."""
        target = self.locate(path)
        kind = _kind(target)
        if kind is None:
            raise FileNotFoundError(path)
        if kind not in (stat.S_IFREG, stat.S_IFDIR):
            raise Invalid("The path names neither a regular file nor a directory.")
        return target, kind == stat.S_IFDIR

    # -- reading ------------------------------------------------------------------------------
    def tree(self) -> list[Entry]:
        """Every file and directory, sorted by path; links and special files are not listed
        (none is ever written)."""
        entries: list[Entry] = []
        for folder, dirs, files in os.walk(self.root):
            base = Path(folder)
            dirs.sort()
            for name in [*dirs, *sorted(files)]:
                info = os.lstat(base / name)
                is_dir = stat.S_ISDIR(info.st_mode)
                if not (is_dir or stat.S_ISREG(info.st_mode)):
                    continue
                relative = (base / name).relative_to(self.root).as_posix()
                size = 0 if is_dir else info.st_size
                entries.append(Entry(relative, is_dir, size, int(info.st_mtime)))
        entries.sort(key=lambda entry: entry.path)
        return entries

    def size(self) -> Size:
        return size_of(self.root)

    def open_file(self, path: str) -> tuple[Path, int]:
        """A regular file's path and size; FileNotFoundError for none or a directory."""
        target, is_dir = self.existing(path)
        if is_dir:
            raise FileNotFoundError(path)
        return target, os.lstat(target).st_size

    # -- writing ------------------------------------------------------------------------------
    def new_incoming(self) -> tuple[int, Path]:
        """A temporary file for a write in progress: its descriptor and path."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.scratch, prefix="incoming-")
        return fd, Path(name)

    def place(self, incoming: Path, path: str) -> None:
        """Move a finished write to `path`, its directories made; Invalid over a directory."""
        target = self.locate(path)
        if _kind(target) == stat.S_IFDIR:
            raise Invalid("The path names a directory; a file cannot replace it.")
        self._make_dirs(target.parent)
        os.chmod(incoming, 0o644)
        os.replace(incoming, target)

    def make_directory(self, path: str) -> None:
        target = self.locate(path)
        kind = _kind(target)
        if kind is not None and kind != stat.S_IFDIR:
            raise Invalid("A file is already at that path.")
        self._make_dirs(target)

    def remove(self, path: str) -> None:
        """Removes a file or a directory tree; FileNotFoundError when there is none."""
        target, is_dir = self.existing(path)
        if is_dir:
            shutil.rmtree(target)
        else:
            target.unlink()

    def clear(self) -> None:
        """Everything under the root goes (an import with `replace`)."""
        for child in list(self.root.iterdir()) if self.root.exists() else []:
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def _make_dirs(self, folder: Path) -> None:
        """Makes `folder` and the missing ones above it, up to the root (checked by locate)."""
        self.root.mkdir(parents=True, exist_ok=True)
        relative = folder.relative_to(self.root)
        here = self.root
        for part in relative.parts:
            here = here / part
            kind = _kind(here)
            if kind is None:
                with contextlib.suppress(FileExistsError):
                    here.mkdir()
                kind = _kind(here)
            if kind != stat.S_IFDIR:
                raise Invalid("A step of the path is a file, not a directory.")


class Incoming:
    """A body being written to a temporary file beside the source, within `limit` bytes,
    a megabyte at a time (each write on a thread): never held whole in memory."""

    FLUSH = 1024 * 1024

    def __init__(self, tree: SourceTree, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._buffer = bytearray()
        fd, self.path = tree.new_incoming()
        self._file = os.fdopen(fd, "wb")

    async def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise TooLarge(
                f"The file is larger than this server accepts ({self.limit} bytes).", self.limit
            )
        self._buffer += chunk
        if len(self._buffer) >= self.FLUSH:
            await self._flush()

    async def finish(self) -> None:
        await self._flush()
        await asyncio.to_thread(self._file.close)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _flush(self) -> None:
        if self._buffer:
            data, self._buffer = bytes(self._buffer), bytearray()
            await asyncio.to_thread(self._file.write, data)


class SourceLocks:
    """One lock per environment, taken by whatever changes or snapshots its source (an edit,
    an import, a build's copy, a delete), so none of them sees another half done."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def of(self, environment_id: str) -> asyncio.Lock:
        lock = self._locks.get(environment_id)
        if lock is None:
            lock = self._locks[environment_id] = asyncio.Lock()
        return lock

    def forget(self, environment_id: str) -> None:
        self._locks.pop(environment_id, None)


class ImportSlots:
    """Imports (an archive received and extracted, a git clone) running now: one at a time
    per environment, and at most `limit` server-wide (each may write up to the import's
    limit to scratch before anything is counted against its owner)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._running: set[str] = set()

    @contextlib.contextmanager
    def hold(self, environment_id: str) -> Iterator[None]:
        """Busy (with the reason) when this environment imports already, or the server runs
        as many imports as it allows."""
        if environment_id in self._running:
            raise Busy("An import into this environment is running; send the next once it ends.")
        if len(self._running) >= self.limit:
            raise Busy(
                f"The server is running {self.limit} imports, as many as it allows at once; "
                "try again shortly."
            )
        self._running.add(environment_id)
        try:
            yield
        finally:
            self._running.discard(environment_id)


class Busy(Exception):
    """An import refused because others run (environment_busy); the reason in words."""


def size_of(root: Path) -> Size:
    """Regular files under `root` and their bytes (links not followed, not counted)."""
    count = total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            info = os.lstat(os.path.join(folder, name))
            if stat.S_ISREG(info.st_mode):
                count += 1
                total += info.st_size
    return Size(count, total)
