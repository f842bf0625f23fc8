"""What the server records of a principal's use: each turn's harness, day and token usage
(the `usage` of its final response object), read for the usage page."""

from __future__ import annotations

from typing import Any

from sqlmodel import col, select

from storage.tables import ResponseRow, SessionRow
from storage.unit import Tx


def turns_since(
    tx: Tx, principal_id: str, since: int
) -> list[tuple[int, str, dict[str, Any] | None]]:
    """(created_at, harness id, usage or None) of each of the principal's turns created at
    or after `since`, deleted ones included: they were used all the same."""
    query = (
        select(ResponseRow.created_at, SessionRow.harness_id, ResponseRow.final)
        .join(SessionRow, col(SessionRow.id) == col(ResponseRow.session_id))
        .where(ResponseRow.principal_id == principal_id, col(ResponseRow.created_at) >= since)
    )
    found: list[tuple[int, str, dict[str, Any] | None]] = []
    for created_at, harness_id, final in tx.orm.exec(query):
        usage = (final or {}).get("usage") if isinstance(final, dict) else None
        found.append((created_at, harness_id, usage if isinstance(usage, dict) else None))
    return found
