"""File parts of records (Memories §4.3, §7): a part names a file uploaded with `POST
/v1/files`, the server completes it from its own file store, keeps the bytes while a version
names them, and serves them to whoever may read the record.

The bytes stay in the server's file store whichever provider keeps the record (`content.bytes:
referenced`): a provider keeps the reference. Which versions name which file is kept here, on
the server's side (`memory_file_use`), so forget and history leave a file readable, and an
erase removes the bytes that nothing else uses and names the records whose bytes stay.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from storage import memory_files as store
from storage.blobs import BlobStore
from storage.db import Database, Order
from storage.tables import FileRow, MemoryFileUseRow
from storage.unit import Tx
from uhp_server.errors import ApiError
from uhp_server.memories.errors import memory_invalid, memory_unsupported
from uhp_server.memories.provider import MemoryProvider, Version


@dataclass(frozen=True)
class PartBytes:
    """The bytes of one file part, as they are served."""

    name: str
    media_type: str
    size: int
    chunks: Iterator[bytes]


def file_ids(content: Iterable[dict[str, Any]]) -> set[str]:
    return {part["file"]["id"] for part in content if _is_file(part)}


def _is_file(part: dict[str, Any]) -> bool:
    return part.get("type") == "file" and isinstance(part.get("file"), dict)


def part_missing() -> ApiError:
    return ApiError(
        404, "memory_record_not_found", "No file part at that index of this record, as read."
    )


class MemoryFiles:
    def __init__(self, db: Database, blobs: BlobStore | None) -> None:
        self.db = db
        self.blobs = blobs

    async def complete(
        self,
        member_id: str,
        provider: MemoryProvider,
        content: list[dict[str, Any]],
        already_named: frozenset[str] = frozenset(),
    ) -> list[dict[str, Any]]:
        """The parts with each file completed from the file store: `name`, `media_type` and
        `bytes` are the server's, never the writer's. A file is one the writer uploaded, or
        one the version being revised already names (a reviser may send back what it read);
        another principal's file is refused exactly as one that is not there."""
        named = file_ids(content)
        if not named:
            return content
        found = await self.db.read(_files_for, member_id, sorted(named), already_named)
        completed = []
        for index, part in enumerate(content):
            if not _is_file(part):
                completed.append(part)
                continue
            row = found.get(part["file"]["id"])
            where = f"content[{index}]"
            if row is None:
                raise memory_invalid(
                    f"{where}: no file with that id that you may use; upload it first with "
                    "POST /v1/files.",
                    where,
                )
            if not any(fnmatch.fnmatchcase(row.media_type, kept) for kept in provider.media):
                raise memory_unsupported(
                    f"{where}: this memory's provider does not keep {row.media_type} files "
                    f"(it keeps {', '.join(provider.media) or 'none'}).",
                    where,
                )
            file = {"id": row.id, "name": row.filename, "media_type": row.media_type}
            completed.append({**part, "file": {**file, "bytes": row.bytes}})
        return completed

    async def note(self, versions: Iterable[Version]) -> None:
        """Which file each version names: its bytes are kept while one does."""
        uses = [
            MemoryFileUseRow(
                record_id=version.id,
                version=version.version,
                file_id=file_id,
                memory_id=version.memory_id,
            )
            for version in versions
            for file_id in sorted(file_ids(version.record.content))
        ]
        if uses:
            await self.db.write(store.record_uses, uses, order=Order.ANY)

    async def release_records(self, record_ids: list[str]) -> list[str]:
        """After an erase: the files nothing else names are deleted with their bytes; the
        answer is the records whose file stays readable (another record or file holds it)."""
        released = await self.db.write(store.release_records, record_ids, order=Order.ANY)
        await self._remove(released.unused_blobs)
        return released.kept_records

    async def release_memories(self, memory_ids: list[str]) -> None:
        released = await self.db.write(store.release_memories, memory_ids, order=Order.ANY)
        await self._remove(released.unused_blobs)

    async def _remove(self, hashes: list[str]) -> None:
        if hashes and self.blobs is not None:
            await asyncio.to_thread(_delete_all, self.blobs, hashes)

    async def bytes_of(self, version: Version, index: int) -> PartBytes:
        """The bytes of the version's part at `index` (the caller may read the record)."""
        content = version.record.content
        if not 0 <= index < len(content) or not _is_file(content[index]):
            raise part_missing()
        row = await self.db.read(store.kept_file, content[index]["file"]["id"])
        if row is None or self.blobs is None or not self.blobs.exists(row.sha256):
            raise part_missing()  # the file was erased, or removed from the file store
        return PartBytes(
            row.filename, row.media_type, row.bytes, self.blobs.read_chunks(row.sha256)
        )


def _files_for(
    tx: Tx, member_id: str, ids: list[str], already_named: frozenset[str]
) -> dict[str, FileRow]:
    found: dict[str, FileRow] = {}
    for file_id in ids:
        row = store.file_of(tx, member_id, file_id)
        if row is None and file_id in already_named:
            row = store.kept_file(tx, file_id)
        if row is not None:
            found[file_id] = row
    return found


def _delete_all(blobs: BlobStore, hashes: list[str]) -> None:
    for sha256 in hashes:
        blobs.delete(sha256)
