"""Responses, their ordered event logs, and idempotency keys."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from sqlmodel import col, delete, select

from storage.event_batches import EventBatch
from storage.inserts import Insert
from storage.tables import EventRow, IdempotencyRow, ResponseRow
from storage.unit import Tx


@dataclass(frozen=True)
class NewResponse:
    """A task's response row, as its acceptance writes it (in progress)."""

    id: str
    principal_id: str
    previous_response_id: str | None
    store: bool
    model: str
    created_at: int
    input_items: str  # JSON
    replica_id: str | None
    # The environment and version the turn reads (Environments §6.5); None: none.
    environment: tuple[str, int] | None = None


@dataclass(frozen=True)
class IdempotencyKey:
    principal_id: str
    key: str
    fingerprint: str


def insert_response(tx: Tx, row: ResponseRow) -> ResponseRow:
    tx.orm.add(row)
    return row


def accepted(response: NewResponse, session_id: str) -> Insert:
    """The row of a task just accepted, in progress in its session."""
    columns: tuple[str, ...] = (
        "id",
        "principal_id",
        "session_id",
        "previous_response_id",
        "status",
        "store",
        "model",
        "created_at",
        "input_items",
        "replica_id",
        "cancel_requested",
    )
    row: tuple[object, ...] = (
        response.id,
        response.principal_id,
        session_id,
        response.previous_response_id,
        "in_progress",
        response.store,
        response.model,
        response.created_at,
        response.input_items,
        response.replica_id,
        False,
    )
    if response.environment is not None:  # named only when set: an untyped NULL is text
        columns += ("environment_id", "environment_version")
        row += response.environment
    return Insert(
        "response",
        columns,
        [row],
        json=frozenset({"input_items"}),
        # Its place in the shared admission line (engine/replicas/shared_admission.py): when it
        # arrived, by the database's clock as leases are, since the replicas' hosts may
        # disagree.
        clock="admission_at",
    )


def insert_accepted(tx: Tx, response: NewResponse, session_id: str) -> None:
    accepted(response, session_id).run(tx)


def first_event(response_id: str, data: str) -> Insert:
    """A response's first event (JSON), numbered 0."""
    return Insert(
        "event", ("response_id", "seq", "data"), [(response_id, 0, data)], json=frozenset({"data"})
    )


def insert_first_event(tx: Tx, response_id: str, data: str) -> None:
    first_event(response_id, data).run(tx)


def idempotency_key(key: IdempotencyKey, response_id: str) -> Insert:
    """The record of the request that made `response_id`; its primary key refuses a second
    request with the key."""
    return Insert(
        "idempotency",
        ("principal_id", "key", "fingerprint", "response_id", "created_at"),
        [(key.principal_id, key.key, key.fingerprint, response_id, time.time())],
    )


def insert_idempotency_key(tx: Tx, key: IdempotencyKey, response_id: str) -> None:
    idempotency_key(key, response_id).run(tx)


def insert_successor(tx: Tx, row: ResponseRow) -> str:
    """Insert `row` as the one successor of its previous response, unless that one already
    has a successor: then nothing is written. Returns the successor's id. The previous row is
    locked meanwhile (PostgreSQL; SQLite's one writer already serializes), so of two writers
    racing, one inserts and the other finds it."""
    s = tx.orm
    s.exec(
        select(ResponseRow.id).where(ResponseRow.id == row.previous_response_id).with_for_update()
    ).first()
    existing = s.exec(
        select(ResponseRow.id).where(ResponseRow.previous_response_id == row.previous_response_id)
    ).first()
    if existing is not None:
        return existing
    s.add(row)
    return row.id


# The idempotency key (and fingerprint) of the new turn that carries a parked response on
# (engine/tasks/steering.py): of two answers carrying it on at once, one starts it.
CARRY_ON_KEY = "uhp-carry-on:"


def successors(tx: Tx, principal_id: str, response_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The responses that follow this one, oldest first (to the second; ties by id), each with
    the metadata it was created with, from its first event: {} for a response not kept, or
    one whose first event is not written yet (a cancel's closing response, for a moment).
    Several can: a parked turn's continuation and a later task of its session both name it as
    their previous response."""
    rows = tx.rows(
        "SELECT r.id, e.data FROM response r"
        " LEFT JOIN event e ON e.response_id = r.id AND e.seq = 0"
        " WHERE r.previous_response_id = ? AND r.principal_id = ? AND r.deleted_at IS NULL"
        " ORDER BY r.created_at, r.id",
        (response_id, principal_id),
    )
    found = []
    for following, data in rows:
        created = _event(data) if data is not None else {}
        found.append((following, created.get("response", {}).get("metadata", {})))
    return found


def get_response(tx: Tx, principal_id: str, response_id: str) -> ResponseRow | None:
    row = tx.orm.get(ResponseRow, response_id)
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


def events_after(tx: Tx, response_id: str, after: int = -1) -> list[dict[str, Any]]:
    rows = tx.rows(
        "SELECT data FROM event WHERE response_id = ? AND seq > ? ORDER BY seq",
        (response_id, after),
    )
    return [_event(data) for (data,) in rows]


def _event(data: Any) -> dict[str, Any]:
    """An event row's data: SQLite hands back the JSON text; psycopg has already parsed
    PostgreSQL's json."""
    event: dict[str, Any] = json.loads(data) if isinstance(data, str) else data
    return event


def finish_response(tx: Tx, response_id: str, final: dict[str, Any]) -> None:
    row = tx.orm.get(ResponseRow, response_id)
    if row is None:
        return
    row.status = final["status"]
    row.final = final
    row.finished_at = time.time()
    tx.orm.add(row)


def unfinished_responses(tx: Tx) -> list[ResponseRow]:
    return list(tx.orm.exec(select(ResponseRow).where(ResponseRow.status == "in_progress")))


def delete_response(tx: Tx, response_id: str) -> None:
    """Make a response unreadable and drop its stored content and events."""
    s = tx.orm
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
    s.exec(delete(EventRow).where(col(EventRow.response_id) == response_id))


def get_idempotency(tx: Tx, principal_id: str, key: str) -> IdempotencyRow | None:
    return tx.orm.get(IdempotencyRow, (principal_id, key))


def put_idempotency(tx: Tx, row: IdempotencyRow) -> None:
    tx.orm.add(row)


def forget_idempotency(tx: Tx, principal_id: str, key: str) -> None:
    tx.orm.exec(
        delete(IdempotencyRow).where(
            col(IdempotencyRow.principal_id) == principal_id, col(IdempotencyRow.key) == key
        )
    )


def prune_idempotency(tx: Tx, older_than: float) -> None:
    tx.orm.exec(delete(IdempotencyRow).where(col(IdempotencyRow.created_at) < older_than))


def mark_failed_unstored(tx: Tx, response_id: str) -> None:
    """End a store=false response whose events were never written."""
    row = tx.orm.get(ResponseRow, response_id)
    if row is not None:
        row.status = "failed"
        row.finished_at = time.time()
        tx.orm.add(row)


def latest_in_session(tx: Tx, session_id: str) -> str | None:
    """The id of the session's most recent response (what continuing the session follows)."""
    # The id alone: ordering whole rows would carry every response's input and final
    # object through the sort (a long session's megabytes, for one id).
    return tx.orm.exec(
        select(ResponseRow.id)
        .where(ResponseRow.session_id == session_id)
        .where(col(ResponseRow.deleted_at).is_(None))
        .order_by(col(ResponseRow.created_at).desc(), col(ResponseRow.id).desc())
    ).first()
