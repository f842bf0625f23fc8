"""Configured harnesses, scoped to their principal."""

from __future__ import annotations

import json
import time
from typing import Any

from storage.tables import HarnessRow
from storage.unit import Rows, Statement, Tx, one_statement

# Read at every task, in plain SQL: the ORM's load of a few rows costs most of a millisecond.
_COLUMNS = "id, principal_id, name, base, config, created_at_ms, is_default"
_LIVE = "deleted_at IS NULL"


def get_harness(tx: Tx, principal_id: str, harness_id: str) -> HarnessRow | None:
    rows = _read(tx, "id = ? AND principal_id = ?", (harness_id, principal_id))
    return rows[0] if rows else None


def list_harnesses(tx: Tx, principal_id: str) -> list[HarnessRow]:
    return _read(tx, "principal_id = ?", (principal_id,))


def insert_harness(tx: Tx, row: HarnessRow) -> HarnessRow:
    tx.orm.add(row)
    return row


def update_harness(tx: Tx, harness_id: str, name: str, config: dict[str, Any]) -> HarnessRow | None:
    row = tx.orm.get(HarnessRow, harness_id)
    if row is None:
        return None
    row.name = name
    row.config = config
    tx.orm.add(row)
    return row


def delete_harness(tx: Tx, harness_id: str) -> None:
    row = tx.orm.get(HarnessRow, harness_id)
    if row is not None:
        row.deleted_at = time.time()
        tx.orm.add(row)


def _defaults(principal_id: str) -> Statement[dict[str, HarnessRow]]:
    return Statement(
        _select("principal_id = ? AND is_default = ?"),
        (principal_id, True),
        lambda rows: _per_base(_harnesses(rows)),
    )


# The principal's default harness per base, in one query (the oldest, should two requests
# have raced to create one). Read at every task: one statement, which storage/db.py sends
# from the loop on PostgreSQL (storage/loop_link.py).
defaults_of = one_statement(_defaults)


def _per_base(rows: list[HarnessRow]) -> dict[str, HarnessRow]:
    found: dict[str, HarnessRow] = {}
    for row in rows:
        found.setdefault(row.base, row)
    return found


def _read(tx: Tx, where: str, params: tuple[Any, ...]) -> list[HarnessRow]:
    """The live harnesses `where` picks, oldest first."""
    return _harnesses(tx.rows(_select(where), params))


def _select(where: str) -> str:
    return f"SELECT {_COLUMNS} FROM harness WHERE {where} AND {_LIVE} ORDER BY created_at_ms, id"


def _harnesses(rows: Rows) -> list[HarnessRow]:
    return [_harness(*row) for row in rows]


def _harness(
    id: str, principal_id: str, name: str, base: str, config: Any, created_at_ms: int, default: Any
) -> HarnessRow:
    return HarnessRow(
        id=id,
        principal_id=principal_id,
        name=name,
        base=base,
        config=json.loads(config) if isinstance(config, str) else config,  # SQLite keeps text
        created_at_ms=created_at_ms,
        is_default=bool(default),  # SQLite keeps 0 or 1
    )
