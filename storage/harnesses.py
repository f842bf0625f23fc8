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


_DEFAULTS = "principal_id = ? AND is_default = ?"


def defaults_of(db: Database, principal_id: str) -> dict[str, HarnessRow]:
    """The principal's default harness per base, in one query (the oldest, should two
    requests have raced to create one)."""
    return _per_base(_read(db, _DEFAULTS, (principal_id, True)))


async def defaults(db: Database, principal_id: str) -> dict[str, HarnessRow]:
    """`defaults_of` from the loop: read at every task, so sent from the loop on PostgreSQL
    (storage/loop_link.py)."""
    rows = await db.select(_statement(db, _DEFAULTS), (principal_id, True))
    return _per_base([_harness(*row) for row in rows])


def _per_base(rows: list[HarnessRow]) -> dict[str, HarnessRow]:
    found: dict[str, HarnessRow] = {}
    for row in rows:
        found.setdefault(row.base, row)
    return found


def _read(db: Database, where: str, params: tuple[Any, ...]) -> list[HarnessRow]:
    """The live harnesses `where` picks, oldest first."""
    with db.plain_connection() as conn:
        rows = conn.execute(_statement(db, where), params)
        return [_harness(*row) for row in rows.fetchall()]


def _statement(db: Database, where: str) -> str:
    return db.raw.sql(
        f"SELECT {_COLUMNS} FROM harness WHERE {where} AND {_LIVE} ORDER BY created_at_ms, id"
    )


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
