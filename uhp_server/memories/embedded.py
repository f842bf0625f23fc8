"""The embedded provider: a memory's records in the server's own database (SQLite, or
PostgreSQL when the server runs on it), one row per version (storage/memories.py)."""

from __future__ import annotations

from collections.abc import Iterable

from storage import memories as store
from storage.db import Database, Order
from storage.tables import MemoryRecordRow
from uhp_server.ids import new_id
from uhp_server.memories.errors import memory_unsupported
from uhp_server.memories.provider import Answer, Erasure, Listing, NewRecord, Question, Version
from uhp_server.memories.records import Writer

EMBEDDED = "embedded"


class EmbeddedProvider:
    id = EMBEDDED

    def __init__(self, db: Database) -> None:
        self.db = db

    async def remember(self, records: list[NewRecord]) -> list[Version] | None:
        now = store.now_ms()
        rows = [_row(new_id("memory_record"), 1, record, now) for record in records]
        stored = await self.db.write(store.insert_record, rows, order=Order.ANY)
        return None if stored is None else [_version(row) for row in stored]

    async def append(self, record_id: str, after: int, record: NewRecord) -> Version | None:
        row = _row(record_id, after + 1, record, store.now_ms())
        row.supersedes = after
        stored = await self.db.write(store.append_version, row, order=Order.ANY)
        return None if stored is None else _version(stored)

    async def forget(self, memory_id: str, record_id: str) -> Version | None:
        row = await self.db.write(store.forget_record, memory_id, record_id, order=Order.ANY)
        return None if row is None else _version(row)

    async def get(self, memory_id: str, record_id: str, as_of: int | None) -> Version | None:
        if as_of is None:
            row = await self.db.read(store.current_record, memory_id, record_id)
        else:
            row = await self.db.read(store.record_as_of, memory_id, record_id, as_of)
        return None if row is None else _version(row)

    async def history(self, memory_id: str, record_id: str) -> list[Version]:
        rows = await self.db.read(store.record_versions, memory_id, record_id)
        return [_version(row) for row in rows]

    async def listing(self, listing: Listing) -> list[Version]:
        query = store.RecordQuery(
            memory_id=listing.memory_id,
            type=listing.type,
            include_forgotten=listing.include_forgotten,
            as_of=listing.as_of,
            after=listing.after,
            limit=listing.limit,
        )
        return [_version(row) for row in await self.db.read(store.list_records, query)]

    async def counts(self, memory_ids: Iterable[str]) -> dict[str, int]:
        return await self.db.read(store.record_counts, list(memory_ids))

    async def locate(self, record_ids: Iterable[str]) -> dict[str, str]:
        rows = await self.db.read(store.records_by_ids, list(record_ids))
        return {record_id: row.memory_id for record_id, row in rows.items()}

    async def erase(self, memory_id: str, record_ids: list[str]) -> Erasure | None:
        # It derives nothing and keeps no copy: its versions are all there is to remove.
        erased = await self.db.write(store.erase_records, memory_id, record_ids, order=Order.ANY)
        return None if erased is None else Erasure(erased, [])

    async def drop(self, memory_ids: list[str]) -> None:
        await self.db.write(store.delete_records, memory_ids, order=Order.ANY)

    async def recall(self, question: Question) -> Answer:
        raise memory_unsupported("Recall is not built yet.")  # being built (issue 29)

    async def referrers(
        self, memory_ids: Iterable[str], record_ids: Iterable[str]
    ) -> list[Version]:
        raise memory_unsupported("The graph is not built yet.")  # being built (issue 29)


def _row(record_id: str, version: int, record: NewRecord, now: int) -> MemoryRecordRow:
    return MemoryRecordRow(
        id=record_id,
        version=version,
        memory_id=record.memory_id,
        type=record.type,
        title=record.title,
        content=record.content,
        attributes=record.attributes,
        refs=record.references,
        status=store.ACTIVE,
        supersedes=None,
        valid_from=record.valid_from,
        valid_to=record.valid_to,
        written_at_ms=now,
        written_by=record.written_by.to_json(),
    )


def _version(row: MemoryRecordRow) -> Version:
    writer = row.written_by or {}
    return Version(
        id=row.id,
        memory_id=row.memory_id,
        version=row.version,
        status=row.status,
        supersedes=row.supersedes,
        written_at_ms=row.written_at_ms,
        invalidated_at_ms=row.invalidated_at_ms,
        follows=row.follows,
        record=NewRecord(
            memory_id=row.memory_id,
            type=row.type,
            title=row.title,
            content=list(row.content or []),
            attributes=dict(row.attributes or {}),
            references=list(row.refs or []),
            valid_from=row.valid_from,
            valid_to=row.valid_to,
            written_by=Writer(
                kind=str(writer.get("kind", "")),
                id=str(writer.get("id", "")),
                type=writer.get("type"),
            ),
        ),
    )
