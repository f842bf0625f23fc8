"""Content-addressed bytes: uploads and artifacts, one file per sha256 under the data dir.

A blob is named by the hash of its content, so the same bytes stored twice take the space
once and a name can never be chosen by a client. Paths are only ever built from hashes this
module computed or read back from the database, and each is checked to be 64 hex digits.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1024 * 1024


class BlobTooLarge(Exception):
    """More bytes than the caller allowed; nothing was kept."""


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self._clear_leftovers()

    def _clear_leftovers(self) -> None:
        """Partial writes of a server that died mid-upload are never referenced: drop them."""
        for leftover in self.tmp.iterdir():
            with contextlib.suppress(OSError):
                leftover.unlink()

    def path(self, sha256: str) -> Path:
        if not _SHA256.match(sha256):
            raise ValueError("not a sha256")
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def new_temp(self) -> tuple[BinaryIO, Path]:
        """An open temporary file inside the store (same filesystem, so adoption is a rename)."""
        fd, name = tempfile.mkstemp(dir=self.tmp, prefix="part-")
        return os.fdopen(fd, "wb"), Path(name)

    def adopt(self, temp: Path, sha256: str) -> None:
        """Move a finished temporary file into place under its hash."""
        target = self.path(sha256)
        if target.exists():
            temp.unlink()
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temp, target)

    def put_bytes(self, data: bytes) -> str:
        sha256 = hashlib.sha256(data).hexdigest()
        if not self.exists(sha256):
            handle, temp = self.new_temp()
            with handle:
                handle.write(data)
            self.adopt(temp, sha256)
        return sha256

    def put_stream(self, source: BinaryIO, limit: int) -> tuple[str, int]:
        """Copy a readable stream in, hashing as it goes; raises BlobTooLarge past limit."""
        digest = hashlib.sha256()
        size = 0
        handle, temp = self.new_temp()
        try:
            with handle:
                while chunk := source.read(CHUNK):
                    size += len(chunk)
                    if size > limit:
                        raise BlobTooLarge
                    digest.update(chunk)
                    handle.write(chunk)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        sha256 = digest.hexdigest()
        self.adopt(temp, sha256)
        return sha256, size

    def writer(self) -> BlobWriter:
        """A new blob, written a chunk at a time (an upload as it streams in)."""
        return BlobWriter(self)

    def read_chunks(self, sha256: str) -> Iterator[bytes]:
        with self.path(sha256).open("rb") as handle:
            while chunk := handle.read(CHUNK):
                yield chunk

    def delete(self, sha256: str) -> None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            self.path(sha256).unlink()


class BlobWriter:
    """A blob being written: hashed and counted as it comes, then kept under its hash or
    dropped. Until `keep`, its bytes sit in a temporary file of the store."""

    def __init__(self, store: BlobStore) -> None:
        self._store = store
        self._handle: BinaryIO | None
        self._handle, self._temp = store.new_temp()
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        assert self._handle is not None, "written after it was kept or dropped"
        self.size += len(chunk)
        self._digest.update(chunk)
        self._handle.write(chunk)

    def discard(self) -> None:
        """Drop what was written (at once: a refused upload keeps nothing)."""
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()
            self._handle = None
        self._temp.unlink(missing_ok=True)

    def keep(self) -> str:
        """Move the bytes into place under their hash, which it returns."""
        assert self._handle is not None, "kept after it was kept or dropped"
        self._handle.close()
        self._handle = None
        sha256 = self._digest.hexdigest()
        self._store.adopt(self._temp, sha256)
        return sha256
