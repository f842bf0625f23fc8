"""Sessions: a chain of responses sharing a conversation and a working directory."""

from __future__ import annotations

import time

from sqlmodel import select

from storage.db import Database, run_statement
from storage.models import SessionRow


def insert_session(db: Database, row: SessionRow) -> SessionRow:
    with db.session() as s:
        s.add(row)
        s.commit()
        return row


def get_session(db: Database, principal_id: str, session_id: str) -> SessionRow | None:
    with db.session() as s:
        row = s.get(SessionRow, session_id)
        if row is None or row.principal_id != principal_id or row.deleted_at is not None:
            return None
        return row


def release_session(
    db: Database, session_id: str, response_id: str, status: str, native_session_id: str | None
) -> None:
    with db.session() as s:
        row = s.get(SessionRow, session_id)
        if row is None:
            return
        if row.active_response_id == response_id:
            row.active_response_id = None
        row.status = status
        row.updated_at = int(time.time())
        if native_session_id:
            row.native_session_id = native_session_id
        s.add(row)
        s.commit()


def set_native_session_id(db: Database, session_id: str, native_session_id: str) -> None:
    """Remember the CLI's own conversation id before the turn ends (a turn paused on a
    question may outlive the server; its answer resumes this conversation)."""
    with db.session() as s:
        row = s.get(SessionRow, session_id)
        if row is not None:
            row.native_session_id = native_session_id
            s.add(row)
            s.commit()


def active_response(db: Database, session_id: str) -> str | None:
    """The response running in the session now, on whichever replica."""
    with db.session() as s:
        row = s.get(SessionRow, session_id)
        return row.active_response_id if row is not None else None


def sessions_with_active_turns(db: Database) -> list[SessionRow]:
    with db.session() as s:
        return list(s.exec(select(SessionRow).where(SessionRow.active_response_id.is_not(None))))  # type: ignore[union-attr]


def release_ended(db: Database, before: float) -> list[str]:
    """Free the sessions still held by a turn that ended before `before` (their release was
    lost), taking that turn's status; their ids."""
    rows = run_statement(
        db,
        "UPDATE session SET active_response_id = NULL, status = r.status, updated_at = :now"
        " FROM response r WHERE session.active_response_id = r.id"
        " AND r.status <> 'in_progress' AND COALESCE(r.finished_at, 0) < :before"
        " RETURNING session.id",
        now=int(time.time()),
        before=before,
    )
    return [row[0] for row in rows]
