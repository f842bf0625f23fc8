"""Snapshots (Memories §5.3) taken and listed: a name for an instant of one memory. A snapshot
copies nothing: reading `as_of` its instant (`at`) is the same read, since every version is
kept."""

from __future__ import annotations

import asyncio

from storage import memories as memory_store
from storage import memory_snapshots as store
from storage.db import Database, Order
from storage.tables import MemorySnapshotRow
from uhp_server.ids import new_id
from uhp_server.memories.records import Writer
from uhp_server.memories.snapshots import Snapshot


async def take(db: Database, memory_id: str, name: str, message: str, writer: Writer) -> Snapshot:
    row = MemorySnapshotRow(
        id=new_id("memory_snapshot"),
        memory_id=memory_id,
        name=name,
        message=message,
        at_ms=memory_store.now_ms(),
        written_by=writer.to_json(),
    )
    taken = _snapshot(await db.write(store.insert_snapshot, row, order=Order.ANY))
    # Answered once the clock has passed its instant: a write made after the answer is
    # never read `as_of` it (versions are kept to the millisecond).
    while memory_store.now_ms() <= taken.at_ms:
        await asyncio.sleep(0.001)
    return taken


async def of_memory(db: Database, memory_id: str) -> list[Snapshot]:
    return [_snapshot(row) for row in await db.read(store.snapshots_of, memory_id)]


def _snapshot(row: MemorySnapshotRow) -> Snapshot:
    writer = row.written_by or {}
    return Snapshot(
        id=row.id,
        memory_id=row.memory_id,
        name=row.name,
        message=row.message,
        at_ms=row.at_ms,
        written_by=Writer(
            str(writer.get("kind", "")), str(writer.get("id", "")), writer.get("type")
        ),
    )
