"""A session's artifacts as one zip (Files §4), written as it is sent.

zipfile can write to a stream it cannot seek (it then uses data descriptors), so each entry
is compressed straight from the blob store into the response: nothing is built on disk or
held whole in memory. A path that two turns both wrote appears once per version, the later
ones named `name (2).ext`, `name (3).ext`, ...
"""

from __future__ import annotations

import time
import zipfile
from collections.abc import Callable, Iterator, Sequence

from uhp_server.files.filenames import portable, split_suffix
from uhp_server.files.stored import StoredFile


class _Sink:
    """A write-only byte stream whose contents are taken out as they arrive."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._chunks.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """(zipfile never closes a stream it was handed; its protocol asks for this.)"""

    def take(self) -> bytes:
        data = b"".join(self._chunks)
        self._chunks.clear()
        return data


def entry_names(rows: Sequence[StoredFile]) -> list[str]:
    """Each row's name in the zip: its own, made portable, or, when an earlier row has it,
    `stem (n).ext` with the first n whose name no row has and no other row was given. Names
    compare without case: zip readers keep one of two entries of the same name, and a
    case-insensitive file system (macOS, Windows) one of `A.txt` and `a.txt`."""
    wanted_names = [portable(row.filename) for row in rows]
    own = {name.casefold() for name in wanted_names}
    given: set[str] = set()
    names = []
    for wanted in wanted_names:
        name, n = wanted, 1
        while name.casefold() in given or (n > 1 and name.casefold() in own):
            n += 1
            name = _numbered(wanted, n)
        given.add(name.casefold())
        names.append(name)
    return names


def _numbered(filename: str, n: int) -> str:
    folder, slash, base = filename.rpartition("/")
    stem, suffix = split_suffix(base)
    return f"{folder}{slash}{stem} ({n}){suffix}"


def zip_stream(
    rows: Sequence[StoredFile], read_chunks: Callable[[str], Iterator[bytes]]
) -> Iterator[bytes]:
    """The zip of the artifacts, a chunk at a time; `read_chunks` reads a blob by its hash."""
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for row, name in zip(rows, entry_names(rows), strict=True):
            info = zipfile.ZipInfo(name, date_time=_date(row.created_at))
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w") as entry:
                for chunk in read_chunks(row.sha256):
                    entry.write(chunk)
                    if out := sink.take():
                        yield out
            if out := sink.take():
                yield out
    if out := sink.take():
        yield out


def _date(timestamp: int) -> tuple[int, int, int, int, int, int]:
    moment = time.gmtime(max(timestamp, 315532800))  # zip cannot date anything before 1980
    return moment[:6]
