"""Configured harnesses, scoped to their principal."""

from __future__ import annotations

import time
from typing import Any

from sqlmodel import col, select

from storage.db import Database
from storage.models import HarnessRow


def get_harness(db: Database, principal_id: str, harness_id: str) -> HarnessRow | None:
    with db.session() as s:
        row = s.get(HarnessRow, harness_id)
        if row is None or row.principal_id != principal_id or row.deleted_at is not None:
            return None
        return row


def list_harnesses(db: Database, principal_id: str) -> list[HarnessRow]:
    with db.session() as s:
        rows = s.exec(
            select(HarnessRow)
            .where(HarnessRow.principal_id == principal_id, col(HarnessRow.deleted_at).is_(None))
            .order_by(col(HarnessRow.created_at_ms), col(HarnessRow.id))
        ).all()
        return list(rows)


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
    with db.session() as s:
        rows = s.exec(
            select(HarnessRow)
            .where(
                HarnessRow.principal_id == principal_id,
                HarnessRow.is_default == True,  # noqa: E712
                HarnessRow.deleted_at.is_(None),  # type: ignore[union-attr]
            )
            .order_by(HarnessRow.created_at_ms, HarnessRow.id)  # type: ignore[arg-type]
        ).all()
    found: dict[str, HarnessRow] = {}
    for row in rows:
        found.setdefault(row.base, row)
    return found
