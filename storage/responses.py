"""Responses, their ordered event logs, and idempotency keys."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlmodel import delete, select

from storage.db import Database
from storage.models import EventRow, IdempotencyRow, ResponseRow


def insert_response(db: Database, row: ResponseRow) -> ResponseRow:
    with db.session() as s:
        s.add(row)
        s.commit()
        return row


def get_response(db: Database, principal_id: str, response_id: str) -> ResponseRow | None:
    with db.session() as s:
        row = s.get(ResponseRow, response_id)
        if row is None or row.principal_id != principal_id or row.deleted_at is not None:
            return None
        return row


def append_event(db: Database, response_id: str, seq: int, data: dict[str, Any]) -> None:
    with db.fast:  # one transaction, committed before the caller publishes the event
        db.fast.execute(
            "INSERT INTO event (response_id, seq, data) VALUES (?, ?, ?)",
            (response_id, seq, json.dumps(data)),
        )


def events_after(db: Database, response_id: str, after: int = -1) -> list[dict[str, Any]]:
    rows = db.fast.execute(
        "SELECT data FROM event WHERE response_id = ? AND seq > ? ORDER BY seq",
        (response_id, after),
    )
    return [json.loads(data) for (data,) in rows]


def finish_response(db: Database, response_id: str, final: dict[str, Any]) -> None:
    with db.session() as s:
        row = s.get(ResponseRow, response_id)
        if row is None:
            return
        row.status = final["status"]
        row.final = final
        row.finished_at = time.time()
        s.add(row)
        s.commit()


def unfinished_responses(db: Database) -> list[ResponseRow]:
    with db.session() as s:
        return list(s.exec(select(ResponseRow).where(ResponseRow.status == "in_progress")))


def delete_response(db: Database, response_id: str) -> None:
    """Make a response unreadable and drop its stored content and events."""
    with db.session() as s:
        row = s.get(ResponseRow, response_id)
        if row is None:
            return
        row.deleted_at = time.time()
        row.input_items = []
        row.final = None
        s.add(row)
        s.exec(delete(EventRow).where(EventRow.response_id == response_id))  # type: ignore[arg-type]
        s.commit()


def get_idempotency(db: Database, principal_id: str, key: str) -> IdempotencyRow | None:
    with db.session() as s:
        return s.get(IdempotencyRow, (principal_id, key))


def put_idempotency(db: Database, row: IdempotencyRow) -> None:
    with db.session() as s:
        s.add(row)
        s.commit()


def forget_idempotency(db: Database, principal_id: str, key: str) -> None:
    with db.session() as s:
        s.exec(
            delete(IdempotencyRow).where(
                IdempotencyRow.principal_id == principal_id,  # type: ignore[arg-type]
                IdempotencyRow.key == key,  # type: ignore[arg-type]
            )
        )
        s.commit()


def prune_idempotency(db: Database, older_than: float) -> None:
    with db.session() as s:
        s.exec(delete(IdempotencyRow).where(IdempotencyRow.created_at < older_than))  # type: ignore[arg-type]
        s.commit()


def mark_failed_unstored(db: Database, response_id: str) -> None:
    """End a store=false response whose events were never written."""
    with db.session() as s:
        row = s.get(ResponseRow, response_id)
        if row is not None:
            row.status = "failed"
            row.finished_at = time.time()
            s.add(row)
            s.commit()
