"""Accepting a task as one unit of work: the idempotency record, the session claim (or the
new session), the door's session key, the input files, the response row and its first event
are written in ONE transaction, so a failure anywhere leaves none of them behind.

Conflicts are the database's to decide: a second request with the same Idempotency-Key fails
on that table's primary key, a second turn for a busy session on the claim's conditional
UPDATE (no row changed), a second request opening a door's session on the key's primary key
(no row inserted). None relies on the writes running on one thread. This module says what
the rows are; storage/acceptance.py writes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from storage.acceptance import (
    AcceptanceRows,
    DoorBinding,
    IdempotencyKey,
    NewResponse,
    NewSession,
)
from storage.tables import HarnessRow, SessionRow
from uhp_server.engine.requests import EngineTask
from uhp_server.engine.tasks import attachments
from uhp_server.engine.tasks.inputs import Attachment, NormalizedInput
from uhp_server.environments.mount import EnvironmentMount
from uhp_server.errors import ApiError
from uhp_server.ids import new_id, new_time_ordered_id


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
    replica_id: str | None = None  # the replica that runs it (engine/replicas/cluster.py)
    door_bound_to: str | None = None  # the session a door's key leaves for the new one
    environment: EnvironmentMount | None = None  # the version the turn reads (tasks/environment.py)


def _environment(a: Acceptance) -> tuple[str, int] | None:
    return (a.environment.environment_id, a.environment.version) if a.environment else None


def rows_of(a: Acceptance) -> AcceptanceRows:
    """What the acceptance writes (storage/acceptance.py writes it in one transaction)."""
    principal_id = a.task.principal_id
    store = a.task.store
    key = a.task.session
    return AcceptanceRows(
        response=NewResponse(
            id=a.response_id,
            principal_id=principal_id,
            previous_response_id=a.previous,
            store=store,
            model=a.model,
            created_at=a.created_at,
            input_items=json.dumps(a.normalized.items if store else []),
            replica_id=a.replica_id,
            environment=_environment(a),
        ),
        claim=a.session.id if a.session is not None else None,
        new_session=None if a.session is not None else _new_session(a),
        idempotency=(
            IdempotencyKey(principal_id, a.idempotency_key, a.fingerprint)
            if a.idempotency_key and a.fingerprint
            else None
        ),
        door=(
            DoorBinding(principal_id, a.harness.id, key.door, key.external_id, a.door_bound_to)
            if key is not None and a.session is None
            else None
        ),
        files=attachments.input_files(a.inline) if store else [],
        first_event=json.dumps(a.first_event) if store else None,
    )


def _new_session(a: Acceptance) -> NewSession:
    # A store=false task leaves no trace of its input, not even as a session title.
    return NewSession(
        id=a.new_session_id or new_time_ordered_id("session"),
        principal_id=a.task.principal_id,
        harness_id=a.harness.id,
        container_id=new_id("container"),
        title=_title(a.normalized.prompt) if a.task.store else "",
        environment=_environment(a),
    )


def session_busy() -> ApiError:
    # No retry_after_ms: how long an agent task will run cannot be known.
    return ApiError(409, "session_busy", "A task is already running in this session.")


def _title(prompt: str) -> str:
    # NUL is dropped: no database text column holds it (PostgreSQL refuses it).
    text = prompt.replace("\x00", "").strip()
    return text.splitlines()[0][:80] if text else ""
