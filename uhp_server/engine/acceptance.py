"""Accepting a task as one unit of work: the idempotency record, the session claim (or the
new session), the door's session key, the input files, the response row and its first event
are written in ONE transaction, so a failure anywhere leaves none of them behind.

Conflicts are the database's to decide: a second request with the same Idempotency-Key fails
on that table's primary key, a second turn for a busy session on the claim's conditional
UPDATE (no row changed). Neither relies on the writes running on one thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session

from storage import door_sessions
from storage import sessions as session_store
from storage.models import EventRow, HarnessRow, IdempotencyRow, ResponseRow, SessionRow
from uhp_server.engine import attachments
from uhp_server.engine.inputs import Attachment, NormalizedInput
from uhp_server.engine.requests import EngineTask
from uhp_server.errors import ApiError
from uhp_server.ids import new_id


@dataclass(frozen=True)
class Acceptance:
    """What the writer thread needs to accept a task."""

    task: EngineTask
    idempotency_key: str | None
    fingerprint: str | None
    harness: HarnessRow
    session: SessionRow | None  # the continued session; None: a new one
    new_session_id: str | None
    previous: str | None
    response_id: str
    model: str
    created_at: int
    normalized: NormalizedInput
    inline: list[Attachment]
    first_event: dict[str, Any]  # `response.created`, numbered 0
    replica_id: str | None = None  # the replica that runs it (engine/cluster.py)
    door_bound_to: str | None = None  # the session a door's key leaves for the new one


def record(s: Session, a: Acceptance) -> SessionRow:
    """Write the acceptance into the caller's transaction (not committed here). Raises
    IntegrityError when another request holds the Idempotency-Key, ApiError(409) when the
    session is busy."""
    principal_id = a.task.principal_id
    store = a.task.store
    if a.idempotency_key and a.fingerprint:
        s.add(
            IdempotencyRow(
                principal_id=principal_id,
                key=a.idempotency_key,
                fingerprint=a.fingerprint,
                response_id=a.response_id,
                created_at=time.time(),
            )
        )
        s.flush()  # the key's primary key decides first, before anything else is written
    # A store=false task leaves no trace of its input, not even as a session title.
    title = _title(a.normalized.prompt) if store else ""
    session = _claim_or_create(s, a, title)
    key = a.task.session
    if key is not None and a.session is None:
        opened = door_sessions.open_session(
            s, principal_id, a.harness.id, key.door, key.external_id, session.id, a.door_bound_to
        )
        if not opened:  # another request opened the key's session since it was looked up
            raise session_busy()
    attachments.record_inline_files(s, principal_id, a.inline, keep=store)
    response = ResponseRow(
        id=a.response_id,
        principal_id=principal_id,
        session_id=session.id,
        previous_response_id=a.previous,
        status="in_progress",
        store=store,
        model=a.model,
        created_at=a.created_at,
        input_items=a.normalized.items if store else [],
        replica_id=a.replica_id,
    )
    # Its place in the shared admission line (engine/shared_admission.py): when it arrived,
    # not when its turn got round to joining, which a slower replica reaches later; by the
    # database's clock, as leases are, since the replicas' hosts may disagree.
    response.admission_at = _database_time(s)
    s.add(response)
    if store:
        s.add(EventRow(response_id=a.response_id, seq=0, data=a.first_event))
    return session


def _database_time(s: Session) -> Any:
    """Now, in seconds, by the database's clock: a SQL expression on PostgreSQL, which the
    insert evaluates; SQLite is one process on one host."""
    if s.get_bind().dialect.name == "postgresql":
        return func.extract("epoch", func.clock_timestamp())
    return time.time()


def session_busy() -> ApiError:
    # No retry_after_ms: how long an agent task will run cannot be known.
    return ApiError(409, "session_busy", "A task is already running in this session.")


def _claim_or_create(s: Session, a: Acceptance, title: str) -> SessionRow:
    """Claim the continued session, or create the new one (titled by its first prompt)."""
    if a.session is not None:
        if not session_store.claim(s, a.session.id, a.response_id):
            raise session_busy()
        claimed = s.get(SessionRow, a.session.id, populate_existing=True)
        assert claimed is not None, "the claim just updated it"
        return claimed
    now = int(time.time())
    session = SessionRow(
        id=a.new_session_id or new_id("session"),
        principal_id=a.task.principal_id,
        harness_id=a.harness.id,
        container_id=new_id("container"),
        title=title,
        created_at=now,
        updated_at=now,
        active_response_id=a.response_id,
    )
    s.add(session)
    return session


def _title(prompt: str) -> str:
    # NUL is dropped: no database text column holds it (PostgreSQL refuses it).
    text = prompt.replace("\x00", "").strip()
    return text.splitlines()[0][:80] if text else ""
