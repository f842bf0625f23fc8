"""A task's acceptance, one unit of work (engine/tasks/acceptance.py says what goes in it and why):
`await db.write(accept, rows, order=Order.ANY)`.

Two parts: the *gate*, the one write that can lose a race (the continued session's claim, or
the door's key), and the rows, written only behind a gate that let them through. `accept`
composes the storage functions that write them, in one transaction. On PostgreSQL it is also
declared as ONE statement (`unit.at_once`), data-modifying CTEs each inserting `FROM gate`:
atomic on its own, one round trip and one answer, where a transaction's statements cost a
round trip each (and, while the server binds its loop, sent from the loop: storage/db.py).
bench/README.md measured what that statement is worth. Past the 65,535 parameters one
statement carries (thousands of inline files), PostgreSQL too gets the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from storage import door_sessions, files, responses, sessions
from storage.dialect import Dialect
from storage.door_sessions import DoorBinding as DoorBinding
from storage.files import InputFile as InputFile
from storage.inserts import Insert
from storage.responses import IdempotencyKey as IdempotencyKey
from storage.responses import NewResponse as NewResponse
from storage.sessions import HeldSession as HeldSession
from storage.sessions import NewSession as NewSession
from storage.unit import Rows, Statement, Tx, at_once


class Busy(Exception):
    """The session is held by another turn, or another request bound the door's key first."""


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

    @property
    def session_id(self) -> str:
        session_id = self.claim or (self.new_session.id if self.new_session else None)
        assert session_id is not None, "an acceptance claims a session or makes one"
        return session_id


def _at_once(dialect: Dialect, unit: AcceptanceRows) -> Statement[HeldSession] | None:
    """PostgreSQL: the acceptance as one statement, in autocommit: all of it, or (an error, a
    closed gate) none."""
    if not dialect.writes_in_with:
        return None
    gate = _gate(unit)
    inserts = _rows(unit)
    parameters = (len(gate[1]) if gate else 0) + sum(insert.parameters for insert in inserts)
    if parameters > dialect.max_parameters:
        return None
    ctes = [f"gate AS ({gate[0]})" if gate else "gate AS (SELECT 1)"]
    params: list[Any] = list(gate[1]) if gate else []
    for n, insert in enumerate(inserts):
        sql, values = insert.behind_gate(dialect.now)
        ctes.append(f"w{n} AS ({sql})")
        params.extend(values)
    return Statement(
        "WITH " + ", ".join(ctes) + " SELECT * FROM gate", params, lambda rows: _held(unit, rows)
    )


@at_once(_at_once)
def accept(tx: Tx, unit: AcceptanceRows) -> HeldSession:
    """Write the unit; the session the turn holds. Raises Busy, or one of the drivers'
    IntegrityErrors (`dialect.integrity_error`) when another request holds the
    Idempotency-Key; either way nothing is written."""
    held = _through_gate(tx, unit)
    if held is None:
        raise Busy
    response = unit.response
    if unit.idempotency is not None:
        responses.insert_idempotency_key(tx, unit.idempotency, response.id)
    if unit.new_session is not None:
        held = sessions.insert_held(tx, unit.new_session, response.id, response.created_at)
    files.insert_inputs(tx, response.principal_id, unit.files)
    responses.insert_accepted(tx, response, unit.session_id)
    if unit.first_event is not None:
        responses.insert_first_event(tx, response.id, unit.first_event)
    return held


def _through_gate(tx: Tx, unit: AcceptanceRows) -> HeldSession | None:
    """The continued session, claimed; or the new session's, once its door's key is bound to
    it (when it has one); None when the gate is closed."""
    if unit.claim is not None:
        return sessions.claim(tx, unit.claim, unit.response.id)
    new = unit.new_session
    assert new is not None, "an acceptance claims a session or makes one"
    if unit.door is not None and not door_sessions.bind_to_new(tx, unit.door, new.id):
        return None
    return HeldSession(new.id, new.container_id, None)


def _gate(unit: AcceptanceRows) -> tuple[str, tuple[Any, ...]] | None:
    """`_through_gate` as one statement whose row says it went through; None when nothing
    can lose."""
    if unit.claim is not None:
        return sessions.CLAIM, sessions.claim_params(unit.claim, unit.response.id)
    if unit.door is None:
        return None
    assert unit.new_session is not None, "a door's key is bound to a new session"
    return door_sessions.binding_statement(unit.door, unit.new_session.id)


def _rows(unit: AcceptanceRows) -> list[Insert]:
    """What `accept` writes behind the gate, in the same order."""
    response = unit.response
    rows: list[Insert] = []
    if unit.idempotency is not None:
        rows.append(responses.idempotency_key(unit.idempotency, response.id))
    if unit.new_session is not None:
        rows.append(sessions.held_new(unit.new_session, response.id, response.created_at))
    if unit.files:
        rows.append(files.input_files(response.principal_id, unit.files))
    rows.append(responses.accepted(response, unit.session_id))
    if unit.first_event is not None:
        rows.append(responses.first_event(response.id, unit.first_event))
    return rows


def _held(unit: AcceptanceRows, passed: Rows) -> HeldSession:
    """What the one statement's rows (the gate's) say."""
    if not passed:
        raise Busy
    if unit.claim is not None:
        return HeldSession(*passed[0])
    new = unit.new_session
    assert new is not None, "an acceptance claims a session or makes one"
    return HeldSession(new.id, new.container_id, None)
