"""Snapshots (Memories §5.3): names for an instant of a memory. They copy nothing."""

from __future__ import annotations

from sqlmodel import col, delete, select

from storage.tables import MemorySnapshotRow
from storage.unit import Tx


def insert_snapshot(tx: Tx, row: MemorySnapshotRow) -> MemorySnapshotRow:
    tx.orm.add(row)
    return row


def snapshots_of(tx: Tx, memory_id: str) -> list[MemorySnapshotRow]:
    """Oldest first."""
    return list(
        tx.orm.exec(
            select(MemorySnapshotRow)
            .where(MemorySnapshotRow.memory_id == memory_id)
            .order_by(col(MemorySnapshotRow.at_ms), col(MemorySnapshotRow.id))
        )
    )


def delete_snapshots(tx: Tx, memory_ids: list[str]) -> None:
    tx.orm.exec(delete(MemorySnapshotRow).where(col(MemorySnapshotRow.memory_id).in_(memory_ids)))
