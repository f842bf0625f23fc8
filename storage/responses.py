"""Responses, their ordered event logs, and idempotency keys."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlmodel import col, delete, select

from storage.db import Database, EventBatch
from storage.models import EventRow, IdempotencyRow, ResponseRow


def insert_response(db: Database, row: ResponseRow) -> ResponseRow:
    with db.session() as s:
        s.add(row)
        s.commit()
        return row


def insert_successor(db: Database, row: ResponseRow) -> str:
    """Insert `row` as the one successor of its previous response, unless that one already
    has a successor: then nothing is written. Returns the successor's id. The previous row is
    locked meanwhile (PostgreSQL; SQLite's one writer already serializes), so of two writers
    racing, one inserts and the other finds it."""
    with db.session() as s:
        s.exec(
            select(ResponseRow.id)
            .where(ResponseRow.id == row.previous_response_id)
            .with_for_update()
        ).first()
        existing = s.exec(
            select(ResponseRow.id).where(
                ResponseRow.previous_response_id == row.previous_response_id
            )
        ).first()
        if existing is not None:
            return existing
        s.add(row)
        s.commit()
        return row.id


# The idempotency key (and fingerprint) of the new turn that carries a parked response on
# (engine/steering.py): of two answers carrying it on at once, one starts it.
CARRY_ON_KEY = "uhp-carry-on:"


def successors(
    db: Database, principal_id: str, response_id: str
) -> list[tuple[str, dict[str, Any]]]:
    """The responses that follow this one, oldest first (to the second; ties by id), each with
    the metadata it was created with, from its first event: {} for a response not kept, or
    one whose first event is not written yet (a cancel's closing response, for a moment).
    Several can: a parked turn's continuation and a later task of its session both name it as
    their previous response."""
    with db.plain_connection() as conn:
        rows = conn.execute(
            db.raw.sql(
                "SELECT r.id, e.data FROM response r"
                " LEFT JOIN event e ON e.response_id = r.id AND e.seq = 0"
                " WHERE r.previous_response_id = ? AND r.principal_id = ? AND r.deleted_at IS NULL"
                " ORDER BY r.created_at, r.id"
            ),
            (response_id, principal_id),
        ).fetchall()
    found = []
    for following, data in rows:
        created = _event(data) if data is not None else {}
        found.append((following, created.get("response", {}).get("metadata", {})))
    return found


def get_response(db: Database, principal_id: str, response_id: str) -> ResponseRow | None:
    with db.session() as s:
        row = s.get(ResponseRow, response_id)
        if row is None or row.principal_id != principal_id or row.deleted_at is not None:
            return None
        return row


def event_batch(
    response_id: str, events: list[dict[str, Any]], final: dict[str, Any] | None = None
) -> EventBatch:
    """Numbered events (and, when the log ends with them, the final response) as rows."""
    rows = [(event["sequence_number"], json.dumps(event)) for event in events]
    if final is None:
        return EventBatch(response_id, rows)
    return EventBatch(response_id, rows, json.dumps(final), final["status"])


def append_events_now(
    db: Database, response_id: str, events: list[dict[str, Any]], final: dict[str, Any] | None
) -> None:
    """Write event rows from a thread that may block (start-up recovery)."""
    db.append_events(event_batch(response_id, events, final)).result()


def events_after(db: Database, response_id: str, after: int = -1) -> list[dict[str, Any]]:
    with db.plain_connection() as conn:
        rows = conn.execute(
            db.raw.sql("SELECT data FROM event WHERE response_id = ? AND seq > ? ORDER BY seq"),
            (response_id, after),
        ).fetchall()
    return [_event(data) for (data,) in rows]


def _event(data: Any) -> dict[str, Any]:
    """An event row's data: SQLite hands back the JSON text; psycopg has already parsed
    PostgreSQL's json."""
    event: dict[str, Any] = json.loads(data) if isinstance(data, str) else data
    return event


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
        if row.previous_response_id is not None:
            # A deleted new turn no longer stands for the parked response it carried on: an
            # answer for that one may start another.
            s.exec(
                delete(IdempotencyRow)
                .where(col(IdempotencyRow.principal_id) == row.principal_id)
                .where(col(IdempotencyRow.key) == CARRY_ON_KEY + row.previous_response_id)
                .where(col(IdempotencyRow.response_id) == response_id)
            )
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


def latest_in_session(db: Database, session_id: str) -> str | None:
    """The id of the session's most recent response (what continuing the session follows)."""
    with db.session() as s:
        row = s.exec(
            select(ResponseRow)
            .where(ResponseRow.session_id == session_id)
            .where(col(ResponseRow.deleted_at).is_(None))
            .order_by(col(ResponseRow.created_at).desc(), col(ResponseRow.id).desc())
        ).first()
        return row.id if row is not None else None
