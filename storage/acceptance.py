"""A task's acceptance, written in plain SQL as one transaction (engine/acceptance.py says
what goes in it and why).

Plain SQL because it runs at every task: the ORM's unit of work for these few rows costs
about a millisecond. On PostgreSQL the statements go out together (a pipeline), so a new
session's acceptance is one round trip; continuing a session, or binding a door's key, waits
for that answer before it commits, since it decides whether to.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from storage.db import Database
from storage.models import SessionRow
from storage.raw_sql import RawBackend

_SESSION_FIELDS = (
    "id",
    "principal_id",
    "harness_id",
    "container_id",
    "title",
    "status",
    "created_at",
    "updated_at",
    "native_session_id",
    "active_response_id",
    "deleted_at",
)
_SESSION_COLUMNS = ", ".join(_SESSION_FIELDS)


class Busy(Exception):
    """The session is held by another turn, or another request bound the door's key first."""


@dataclass(frozen=True)
class IdempotencyKey:
    principal_id: str
    key: str
    fingerprint: str


@dataclass(frozen=True)
class NewSession:
    id: str
    principal_id: str
    harness_id: str
    container_id: str
    title: str


@dataclass(frozen=True)
class DoorBinding:
    """A door's key for the new session: bound to nothing yet, or moved from `replacing`."""

    principal_id: str
    harness_id: str
    door: str
    external_id: str
    replacing: str | None


@dataclass(frozen=True)
class InputFile:
    id: str
    filename: str
    size: int
    media_type: str
    sha256: str


@dataclass(frozen=True)
class NewResponse:
    id: str
    principal_id: str
    previous_response_id: str | None
    store: bool
    model: str
    created_at: int
    input_items: str  # JSON
    replica_id: str | None


@dataclass(frozen=True)
class AcceptanceRows:
    """Everything one task's acceptance writes. Exactly one of `claim` (the continued
    session's id) and `new_session`."""

    response: NewResponse
    claim: str | None = None
    new_session: NewSession | None = None
    idempotency: IdempotencyKey | None = None
    door: DoorBinding | None = None
    files: list[InputFile] = field(default_factory=list)
    first_event: str | None = None  # JSON, numbered 0; None when the response is not kept


def accept(db: Database, unit: AcceptanceRows) -> SessionRow:
    """Write the unit in one transaction; returns the session the turn holds. Raises Busy, or
    the driver's IntegrityError (`db.raw.integrity_error`) when another request holds the
    Idempotency-Key; either way nothing is written."""
    with db.plain_connection() as conn:
        try:
            return _write(conn, db.raw, unit)
        except BaseException:
            if db.raw.usable(conn) and db.raw.in_transaction(conn):
                with contextlib.suppress(Exception):  # the first error is the one to report
                    conn.execute("ROLLBACK")
            raise


def _write(conn: Any, raw: RawBackend, unit: AcceptanceRows) -> SessionRow:
    sql = raw.sql
    claim = door = None
    try:
        with raw.pipelined(conn):
            raw.begin_write(conn)
            if unit.idempotency is not None:
                _record_key(conn, sql, unit.idempotency, unit.response.id)
            if unit.claim is not None:
                claim = _claim(conn, sql, unit.claim, unit.response.id)
                session_id = unit.claim
            else:
                session = _create(conn, sql, unit)
                session_id = session.id
            if unit.door is not None:
                door = _bind_door(conn, sql, unit.door, session_id)
            record_inline_files(conn, sql, unit.response.principal_id, unit.files)
            _insert_response(conn, raw, unit.response, session_id)
            if unit.first_event is not None:
                conn.execute(
                    sql("INSERT INTO event (response_id, seq, data) VALUES (?, 0, ?)"),
                    (unit.response.id, unit.first_event),
                )
            if claim is None and door is None:
                conn.execute("COMMIT")
                return session
        # The pipeline's answers are in: a lost claim or key rolls the whole unit back.
        if claim is not None:
            claimed = claim.fetchall()
            if not claimed:
                raise Busy
            session = _session_row(claimed[0])
        if door is not None and door.rowcount != 1:
            raise Busy
        conn.execute("COMMIT")
        return session
    finally:
        if claim is not None:
            claim.close()  # SQLite: an unfinished statement keeps its connection from committing


def _record_key(conn: Any, sql: Any, key: IdempotencyKey, response_id: str) -> None:
    """The Idempotency-Key's record: its primary key refuses a second request with it."""
    conn.execute(
        sql(
            "INSERT INTO idempotency (principal_id, key, fingerprint, response_id, created_at)"
            " VALUES (?, ?, ?, ?, ?)"
        ),
        (key.principal_id, key.key, key.fingerprint, response_id, time.time()),
    )


def _claim(conn: Any, sql: Any, session_id: str, response_id: str) -> Any:
    """Claim the continued session: one conditional statement, so the database decides which
    of two racing requests wins. Its cursor's row is the session, when this one did."""
    return conn.execute(
        sql(
            "UPDATE session SET active_response_id = ?, status = 'in_progress', updated_at = ?"
            f" WHERE id = ? AND active_response_id IS NULL RETURNING {_SESSION_COLUMNS}"
        ),
        (response_id, int(time.time()), session_id),
    )


def _create(conn: Any, sql: Any, unit: AcceptanceRows) -> SessionRow:
    new = unit.new_session
    assert new is not None, "an acceptance claims a session or makes one"
    now = int(time.time())
    row = SessionRow(
        id=new.id,
        principal_id=new.principal_id,
        harness_id=new.harness_id,
        container_id=new.container_id,
        title=new.title,
        status="in_progress",
        created_at=now,
        updated_at=now,
        active_response_id=unit.response.id,
    )
    conn.execute(
        sql(
            "INSERT INTO session (id, principal_id, harness_id, container_id, title, status,"
            " created_at, updated_at, active_response_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ),
        (
            row.id,
            row.principal_id,
            row.harness_id,
            row.container_id,
            row.title,
            row.status,
            now,
            now,
            row.active_response_id,
        ),
    )
    return row


def _bind_door(conn: Any, sql: Any, door: DoorBinding, session_id: str) -> Any:
    """Bind the door's key to the new session; its cursor's rowcount is 1 when it did."""
    key = (door.principal_id, door.harness_id, door.door, door.external_id)
    now = int(time.time())
    if door.replacing is not None:
        return conn.execute(
            sql(
                "UPDATE door_session SET session_id = ?, created_at = ? WHERE principal_id = ?"
                " AND harness_id = ? AND door = ? AND external_id = ? AND session_id = ?"
            ),
            (session_id, now, *key, door.replacing),
        )
    return conn.execute(
        sql(
            "INSERT INTO door_session (principal_id, harness_id, door, external_id,"
            " session_id, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
        ),
        (*key, session_id, now),
    )


def record_inline_files(conn: Any, sql: Any, principal_id: str, files: list[InputFile]) -> None:
    """The task's inline files as the principal's File objects (their blobs already stored)."""
    if not files:
        return
    now = int(time.time())
    cursor = conn.cursor()
    try:
        cursor.executemany(
            sql(
                "INSERT INTO file (id, principal_id, filename, bytes, media_type, sha256,"
                " purpose, created_at) VALUES (?, ?, ?, ?, ?, ?, 'input', ?)"
            ),
            [(f.id, principal_id, f.filename, f.size, f.media_type, f.sha256, now) for f in files],
        )
    finally:
        cursor.close()


def _insert_response(conn: Any, raw: RawBackend, response: NewResponse, session_id: str) -> None:
    # `admission_at`, its place in the shared admission line (engine/shared_admission.py), is
    # when it arrived by the database's clock, as leases are: the replicas' hosts may disagree.
    conn.execute(
        raw.sql(
            "INSERT INTO response (id, principal_id, session_id, previous_response_id, status,"
            " store, model, created_at, input_items, replica_id, cancel_requested, admission_at)"
            f" VALUES (?, ?, ?, ?, 'in_progress', ?, ?, ?, ?, ?, ?, {raw.now})"
        ),
        (
            response.id,
            response.principal_id,
            session_id,
            response.previous_response_id,
            response.store,
            response.model,
            response.created_at,
            response.input_items,
            response.replica_id,
            False,
        ),
    )


def _session_row(values: tuple[Any, ...]) -> SessionRow:
    return SessionRow(**dict(zip(_SESSION_FIELDS, values, strict=True)))
