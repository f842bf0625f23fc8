"""Configured harnesses, scoped to their principal."""

from __future__ import annotations

import json
import time
from typing import Any

from storage.db import Database
from storage.models import HarnessRow

# Read at every task, in plain SQL: the ORM's load of a few rows costs most of a millisecond.
_COLUMNS = "id, principal_id, name, base, config, created_at_ms, is_default"
_LIVE = "deleted_at IS NULL"


def get_harness(db: Database, principal_id: str, harness_id: str) -> HarnessRow | None:
    rows = _read(db, "id = ? AND principal_id = ?", (harness_id, principal_id))
    return rows[0] if rows else None


def list_harnesses(db: Database, principal_id: str) -> list[HarnessRow]:
    return _read(db, "principal_id = ?", (principal_id,))


def insert_harness(db: Database, row: HarnessRow) -> HarnessRow:
    with db.session() as s:
        s.add(row)
        s.commit()
        return row


def update_harness(
    db: Database, harness_id: str, name: str, config: dict[str, Any]
) -> HarnessRow | None:
    with db.session() as s:
        row = s.get(HarnessRow, harness_id)
        if row is None:
            return None
        row.name = name
        row.config = config
        s.add(row)
        s.commit()
        return row


def delete_harness(db: Database, harness_id: str) -> None:
    with db.session() as s:
        row = s.get(HarnessRow, harness_id)
        if row is not None:
            row.deleted_at = time.time()
            s.add(row)
            s.commit()


def defaults_of(db: Database, principal_id: str) -> dict[str, HarnessRow]:
    """The principal's default harness per base, in one query (the oldest, should two
    requests have raced to create one)."""
    found: dict[str, HarnessRow] = {}
    for row in _read(db, "principal_id = ? AND is_default = ?", (principal_id, True)):
        found.setdefault(row.base, row)
    return found


def _read(db: Database, where: str, params: tuple[Any, ...]) -> list[HarnessRow]:
    """The live harnesses `where` picks, oldest first."""
    statement = f"SELECT {_COLUMNS} FROM harness WHERE {where} AND {_LIVE}"
    with db.plain_connection() as conn:
        rows = conn.execute(db.raw.sql(statement + " ORDER BY created_at_ms, id"), params)
        return [_harness(*row) for row in rows.fetchall()]


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
