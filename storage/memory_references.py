"""The embedded provider's index of references by target (Memories §6.6): each version's
references, one row each, so the records that point at a record are found by an index and
not by reading every record. Written in the transaction that writes the version; the
version's own `refs` stay the truth."""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import col, delete, select

from storage.memories import ACTIVE
from storage.tables import MemoryRecordRow, MemoryReferenceRow
from storage.unit import Tx


def index_versions(tx: Tx, rows: Iterable[MemoryRecordRow]) -> None:
    for row in rows:
        for position, ref in enumerate(row.refs or []):
            tx.orm.add(
                MemoryReferenceRow(
                    record_id=row.id,
                    version=row.version,
                    position=position,
                    memory_id=row.memory_id,
                    target_record_id=ref["record_id"],
                )
            )


def unindex_records(tx: Tx, record_ids: list[str]) -> None:
    tx.orm.exec(delete(MemoryReferenceRow).where(col(MemoryReferenceRow.record_id).in_(record_ids)))


def unindex_memories(tx: Tx, memory_ids: list[str]) -> None:
    tx.orm.exec(delete(MemoryReferenceRow).where(col(MemoryReferenceRow.memory_id).in_(memory_ids)))


def referrers(tx: Tx, memory_ids: list[str], record_ids: list[str]) -> list[MemoryRecordRow]:
    """The active records of these memories whose current version references any of
    these records, each once."""
    if not memory_ids or not record_ids:
        return []
    found = tx.orm.exec(
        select(MemoryRecordRow)
        .join(
            MemoryReferenceRow,
            (col(MemoryReferenceRow.record_id) == col(MemoryRecordRow.id))
            & (col(MemoryReferenceRow.version) == col(MemoryRecordRow.version)),
        )
        .where(
            col(MemoryReferenceRow.target_record_id).in_(record_ids),
            col(MemoryRecordRow.memory_id).in_(memory_ids),
            MemoryRecordRow.status == ACTIVE,
        )
        .order_by(col(MemoryRecordRow.id))
    )
    unique: dict[str, MemoryRecordRow] = {}
    for row in found:
        unique.setdefault(row.id, row)
    return list(unique.values())
