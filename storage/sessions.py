"""Sessions: a chain of responses sharing a conversation and a working directory."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlmodel import col, select

from storage.inserts import Insert
from storage.tables import SessionRow
from storage.unit import Tx


@dataclass(frozen=True)
class HeldSession:
    """The session an accepted turn holds: what the turn needs of it."""

    id: str
    container_id: str
    native_session_id: str | None  # the agent CLI's own conversation, to resume


@dataclass(frozen=True)
class NewSession:
    id: str
    principal_id: str
    harness_id: str
    container_id: str
    title: str
    # The environment and version its turns read, fixed at its start (Environments §4, §6).
    environment: tuple[str, int] | None = None


def insert_session(tx: Tx, row: SessionRow) -> SessionRow:
    tx.orm.add(row)
    return row


def held_new(new: NewSession, response_id: str, at: int) -> Insert:
    """A new session, held from the start by the response's turn."""
    columns: tuple[str, ...] = (
        "id",
        "principal_id",
        "harness_id",
        "container_id",
        "title",
        "status",
        "created_at",
        "updated_at",
        "active_response_id",
    )
    row: tuple[object, ...] = (
        new.id,
        new.principal_id,
        new.harness_id,
        new.container_id,
        new.title,
        "in_progress",
        at,
        at,
        response_id,
    )
    if new.environment is not None:  # named only when set: an untyped NULL is text
        columns += ("environment_id", "environment_version")
        row += new.environment
    return Insert("session", columns, [row])


def insert_held(tx: Tx, new: NewSession, response_id: str, at: int) -> HeldSession:
    """Make a new session, held by the response's turn."""
    held_new(new, response_id, at).run(tx)
    return HeldSession(new.id, new.container_id, None)


# A turn's claim of its session: one conditional statement, so that the database decides
# which of two racing requests wins (storage/acceptance.py sends it inside a larger one).
CLAIM = (
    "UPDATE session SET active_response_id = ?, status = 'in_progress', updated_at = ?"
    " WHERE id = ? AND active_response_id IS NULL"
    " RETURNING id, container_id, native_session_id"
)


def claim_params(session_id: str, response_id: str) -> tuple[str, int, str]:
    return (response_id, int(time.time()), session_id)


def claim(tx: Tx, session_id: str, response_id: str) -> HeldSession | None:
    """Hold the session for the response's turn; None when another turn holds it."""
    rows = tx.rows(CLAIM, claim_params(session_id, response_id))
    return HeldSession(*rows[0]) if rows else None


def get_session(tx: Tx, principal_id: str, session_id: str) -> SessionRow | None:
    row = tx.orm.get(SessionRow, session_id)
    if row is None or row.principal_id != principal_id or row.deleted_at is not None:
        return None
    return row


def release_session(
    tx: Tx, session_id: str, response_id: str, status: str, native_session_id: str | None
) -> None:
    row = tx.orm.get(SessionRow, session_id)
    if row is None:
        return
    if row.active_response_id == response_id:
        row.active_response_id = None
    row.status = status
    row.updated_at = int(time.time())
    if native_session_id:
        row.native_session_id = native_session_id
    tx.orm.add(row)


def set_native_session_id(tx: Tx, session_id: str, native_session_id: str) -> None:
    """Remember the CLI's own conversation id before the turn ends (a turn paused on a
    question may outlive the server; its answer resumes this conversation)."""
    row = tx.orm.get(SessionRow, session_id)
    if row is not None:
        row.native_session_id = native_session_id
        tx.orm.add(row)


def active_response(tx: Tx, session_id: str) -> str | None:
    """The response running in the session now, on whichever replica."""
    row = tx.orm.get(SessionRow, session_id)
    return row.active_response_id if row is not None else None


def sessions_with_active_turns(tx: Tx) -> list[SessionRow]:
    return list(
        tx.orm.exec(select(SessionRow).where(col(SessionRow.active_response_id).is_not(None)))
    )


def release_ended(tx: Tx, before: float) -> list[str]:
    """Free the sessions still held by a turn that ended before `before` (their release was
    lost), taking that turn's status; their ids."""
    rows = tx.rows(
        "UPDATE session SET active_response_id = NULL, status = r.status, updated_at = :now"
        " FROM response r WHERE session.active_response_id = r.id"
        " AND r.status <> 'in_progress' AND COALESCE(r.finished_at, 0) < :before"
        " RETURNING session.id",
        {"now": int(time.time()), "before": before},
    )
    return [row[0] for row in rows]
