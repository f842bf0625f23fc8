"""A task's acceptance, written in plain SQL as one transaction (engine/acceptance.py says
what goes in it and why).

Plain SQL because it runs at every task: the ORM's unit of work for these few rows costs
about a millisecond. Two parts: the *gate*, the one write that can lose a race (the continued
session's claim, or the door's key), and the rows, written only behind a gate that let them
through. SQLite runs them as statements of one `BEGIN IMMEDIATE` transaction, calls in
process. PostgreSQL gets them as ONE statement, data-modifying CTEs each inserting `FROM gate`:
atomic on its own, one round trip and one answer, where a transaction's statements cost a
round trip each, or a pipeline's machinery several times one statement's. (Past the 65,535
parameters one statement carries, PostgreSQL too gets the transaction of statements.)
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from storage.db import Database
from storage.raw_sql import MAX_PARAMETERS, PostgresBackend, RawBackend


@dataclass(frozen=True)
class HeldSession:
    """The session an accepted turn holds: what the turn needs of it."""

    id: str
    container_id: str
    native_session_id: str | None  # the agent CLI's own conversation, to resume


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


async def accept(db: Database, unit: AcceptanceRows) -> HeldSession:
    """Write the unit in one transaction; returns the session the turn holds. Raises Busy, or
    one of the drivers' IntegrityErrors (`db.raw.integrity_error`) when another request holds
    the Idempotency-Key; either way nothing is written."""
    gate = _gate(unit)
    rows = _rows(unit)
    if db.dialect == "postgresql" and _parameters(gate, rows) <= MAX_PARAMETERS:
        passed = await db.write_statement(*_at_once(db.raw, gate, rows))
    else:  # SQLite, or more parameters than one statement carries (thousands of files)
        passed = await db.write_single(_in_steps_on, db, gate, rows)
    if not passed:
        raise Busy
    if unit.claim is not None:
        return HeldSession(*passed[0])
    new = unit.new_session
    assert new is not None, "an acceptance claims a session or makes one"
    return HeldSession(new.id, new.container_id, None)


@dataclass(frozen=True)
class _Gate:
    """The write that decides: a statement with `?` parameters and a RETURNING clause, whose
    row says it went through."""

    sql: str
    params: tuple[Any, ...]


@dataclass(frozen=True)
class _Rows:
    """Rows for one table, inserted once the gate let them through."""

    table: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    json: frozenset[str] = frozenset()  # columns given as JSON text
    clock: str | None = None  # a column set to the database's clock, in seconds

    def insert(self, now: str) -> str:
        """One row's INSERT, with `?` parameters; `now`: the database's clock in SQL."""
        values = ", ".join(["?"] * len(self.columns) + ([now] if self.clock else []))
        return f"INSERT INTO {self.table} ({self._targets()}) VALUES ({values})"

    def postgresql(self) -> tuple[str, list[Any]]:
        """An INSERT of these rows for each row of `gate`. Only JSON columns are cast: PostgreSQL
        types the other untyped parameters from the column they go to, or as text (a NULL goes
        only to text columns here)."""
        one = ", ".join("%s::json" if c in self.json else "%s" for c in self.columns)
        values = ", ".join(f"({one})" for _ in self.rows)
        names = ", ".join(f"v{i}" for i in range(len(self.columns)))
        clock = f", {PostgresBackend.now}" if self.clock else ""
        sql = (
            f"INSERT INTO {self.table} ({self._targets()}) SELECT {names}{clock}"
            f" FROM gate, (VALUES {values}) AS v ({names})"
        )
        return sql, [field for row in self.rows for field in row]

    def _targets(self) -> str:
        return ", ".join(self.columns + ((self.clock,) if self.clock else ()))


def _in_steps_on(db: Database, gate: _Gate | None, rows: list[_Rows]) -> list[tuple[Any, ...]]:
    with db.plain_connection() as conn:
        return _in_steps(conn, db.raw, gate, rows)


def _in_steps(
    conn: Any, raw: RawBackend, gate: _Gate | None, rows: list[_Rows]
) -> list[tuple[Any, ...]]:
    """The gate, then (when it let them through) the rows, in one transaction."""
    raw.begin_write(conn)
    try:
        passed: list[tuple[Any, ...]] = [()]
        cursor = conn.cursor()
        try:
            if gate is not None:
                cursor.execute(raw.sql(gate.sql), gate.params)
                passed = cursor.fetchall()  # all: SQLite cannot commit beside an unfinished one
            if passed:
                for table in rows:
                    cursor.executemany(raw.sql(table.insert(raw.now)), table.rows)
        finally:
            cursor.close()
        conn.execute("COMMIT" if passed else "ROLLBACK")
        return passed
    except BaseException:
        if raw.in_transaction(conn):
            with contextlib.suppress(Exception):  # the first error is the one to report
                conn.execute("ROLLBACK")
        raise


def _at_once(raw: RawBackend, gate: _Gate | None, rows: list[_Rows]) -> tuple[str, list[Any]]:
    """PostgreSQL: one statement, in autocommit: all of it, or (an error, a closed gate) none."""
    ctes = [f"gate AS ({raw.sql(gate.sql)})" if gate else "gate AS (SELECT 1)"]
    params = list(gate.params) if gate else []
    for n, table in enumerate(rows):
        sql, values = table.postgresql()
        ctes.append(f"w{n} AS ({sql})")
        params.extend(values)
    return "WITH " + ", ".join(ctes) + " SELECT * FROM gate", params


def _parameters(gate: _Gate | None, rows: list[_Rows]) -> int:
    return (len(gate.params) if gate else 0) + sum(
        len(table.columns) * len(table.rows) for table in rows
    )


def _gate(unit: AcceptanceRows) -> _Gate | None:
    """The claim of the continued session (its row comes back), or the door's key bound to
    the new session; None when nothing can lose."""
    now = int(time.time())
    if unit.claim is not None:
        # One conditional statement: the database decides which of two racing requests wins.
        return _Gate(
            "UPDATE session SET active_response_id = ?, status = 'in_progress', updated_at = ?"
            " WHERE id = ? AND active_response_id IS NULL"
            " RETURNING id, container_id, native_session_id",
            (unit.response.id, now, unit.claim),
        )
    door = unit.door
    if door is None:
        return None
    assert unit.new_session is not None, "a door's key is bound to a new session"
    key = (door.principal_id, door.harness_id, door.door, door.external_id)
    if door.replacing is not None:
        return _Gate(
            "UPDATE door_session SET session_id = ?, created_at = ? WHERE principal_id = ?"
            " AND harness_id = ? AND door = ? AND external_id = ? AND session_id = ?"
            " RETURNING 1",
            (unit.new_session.id, now, *key, door.replacing),
        )
    return _Gate(
        "INSERT INTO door_session (principal_id, harness_id, door, external_id, session_id,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1",
        (*key, unit.new_session.id, now),
    )


def _rows(unit: AcceptanceRows) -> list[_Rows]:
    response = unit.response
    session_id = unit.claim or (unit.new_session.id if unit.new_session else None)
    assert session_id is not None, "an acceptance claims a session or makes one"
    rows: list[_Rows] = []
    if unit.idempotency is not None:
        key = unit.idempotency
        # Its primary key refuses a second request with the key.
        rows.append(
            _Rows(
                "idempotency",
                ("principal_id", "key", "fingerprint", "response_id", "created_at"),
                [(key.principal_id, key.key, key.fingerprint, response.id, time.time())],
            )
        )
    if unit.new_session is not None:
        new = unit.new_session
        at = response.created_at
        rows.append(
            _Rows(
                "session",
                (
                    "id",
                    "principal_id",
                    "harness_id",
                    "container_id",
                    "title",
                    "status",
                    "created_at",
                    "updated_at",
                    "active_response_id",
                ),
                [
                    (
                        new.id,
                        new.principal_id,
                        new.harness_id,
                        new.container_id,
                        new.title,
                        "in_progress",
                        at,
                        at,
                        response.id,
                    )
                ],
            )
        )
    rows.extend(_input_file_rows(response.principal_id, unit.files))
    rows.append(
        _Rows(
            "response",
            (
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
            ),
            [
                (
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
            ],
            json=frozenset({"input_items"}),
            # Its place in the shared admission line (engine/shared_admission.py): when it
            # arrived, by the database's clock as leases are, since the replicas' hosts may
            # disagree.
            clock="admission_at",
        )
    )
    if unit.first_event is not None:
        rows.append(
            _Rows(
                "event",
                ("response_id", "seq", "data"),
                [(response.id, 0, unit.first_event)],
                json=frozenset({"data"}),
            )
        )
    return rows


_FILE_COLUMNS = (
    "id",
    "principal_id",
    "filename",
    "bytes",
    "media_type",
    "sha256",
    "purpose",
    "created_at",
)


def _input_file_rows(principal_id: str, files: list[InputFile]) -> list[_Rows]:
    """The task's inline files as the principal's File objects (their blobs already stored)."""
    if not files:
        return []
    now = int(time.time())
    return [
        _Rows(
            "file",
            _FILE_COLUMNS,
            [
                (f.id, principal_id, f.filename, f.size, f.media_type, f.sha256, "input", now)
                for f in files
            ],
        )
    ]
