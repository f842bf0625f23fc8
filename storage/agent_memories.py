"""A harness's memory settings and what each session's agent was given (Memories §9), as
rows. Who the agent may reach is not here: it is read off the grants (storage/memories.py)."""

from __future__ import annotations

from typing import Any

from storage.tables import HarnessMemoryRow, SessionMemoryRow
from storage.unit import Tx


def harness_settings(tx: Tx, harness_id: str) -> HarnessMemoryRow | None:
    return tx.orm.get(HarnessMemoryRow, harness_id)


def put_harness_settings(
    tx: Tx, harness_id: str, default_memory_id: str | None, observe: bool
) -> HarnessMemoryRow:
    row = tx.orm.get(HarnessMemoryRow, harness_id) or HarnessMemoryRow(harness_id=harness_id)
    row.default_memory_id = default_memory_id
    row.observe = observe
    tx.orm.add(row)
    return row


def session_memory(tx: Tx, session_id: str) -> SessionMemoryRow | None:
    return tx.orm.get(SessionMemoryRow, session_id)


def put_session_memory(
    tx: Tx, session_id: str, memory_id: str | None, primer: str, primed: dict[str, Any]
) -> None:
    """Written once, when the session starts; a later write (a session that lost the race
    to start) keeps the first."""
    if tx.orm.get(SessionMemoryRow, session_id) is None:
        tx.orm.add(
            SessionMemoryRow(
                session_id=session_id, memory_id=memory_id, primer=primer, primed=primed
            )
        )


def mark_compacted(tx: Tx, session_id: str) -> None:
    """The session's CLI compacted its conversation: its next turn is primed afresh. A
    session whose agent held no memory when it started has no row and nothing to prime."""
    row = tx.orm.get(SessionMemoryRow, session_id)
    if row is not None and not row.reprime:
        row.reprime = True
        tx.orm.add(row)


def put_reprimed(tx: Tx, session_id: str, primer: str, primed: dict[str, Any]) -> None:
    """The block placed afresh after a compaction, kept for the turns after it; the mark is
    cleared (a compaction during this very turn marks it again, later)."""
    row = tx.orm.get(SessionMemoryRow, session_id)
    if row is not None:
        row.primer, row.primed, row.reprime = primer, primed, False
        tx.orm.add(row)


def delete_session_memory(tx: Tx, session_ids: list[str]) -> None:
    for session_id in session_ids:
        row = tx.orm.get(SessionMemoryRow, session_id)
        if row is not None:
            tx.orm.delete(row)
