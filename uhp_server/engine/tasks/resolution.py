"""Which harness, session and previous response a task runs with: the chain its
`previous_response_id` names, a door's session key, or the principal's default harness
(created on its first task). Reads go to a reader thread; the writer is used only where
resolving writes."""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness_bases.base import HarnessBase
from storage import door_sessions, session_listing
from storage import harnesses as harness_store
from storage import responses as response_store
from storage import sessions as session_store
from storage.db import Database
from storage.tables import HarnessRow, SessionRow
from storage.unit import Tx
from uhp_server.engine.requests import EngineTask
from uhp_server.errors import ApiError
from uhp_server.harnesses.defaults import default_harness, first_default, made_default
from uhp_server.settings import Settings


@dataclass(frozen=True)
class Resolved:
    harness: HarnessRow
    session: SessionRow | None = None  # the session it continues; None: a new one
    previous: str | None = None  # the response it follows
    # A door's key bound to a session it can no longer continue (expired, deleted): the new
    # session takes the key over from this one (engine/tasks/acceptance.py).
    door_bound_to: str | None = None


class TaskResolution:
    def __init__(self, settings: Settings, db: Database, bases: dict[str, HarnessBase]) -> None:
        self.settings = settings
        self.db = db
        self.bases = bases

    async def resolve(self, task: EngineTask) -> Resolved:
        """The task's harness, session and previous response. Reads (on a reader thread, or
        the default harnesses' one statement from the loop); on the writer only where it
        writes: a door's session key, and a principal's first task, which creates its default
        harnesses."""
        if task.previous_response_id is None and task.session is not None:
            return await self.db.write(self._door_session, task)
        if task.previous_response_id is None and task.harness_id is None:
            # The most common task: a new session on the principal's default harness, whose
            # one read goes from the loop on PostgreSQL (storage/loop_link.py).
            harness = first_default(
                await self.db.read(harness_store.defaults_of, task.principal_id), self.bases
            )
            found = Resolved(harness) if harness is not None else None
        else:
            found = await self.db.read(self._chain, task, False)
        if found is None:
            found = await self.db.write(self._chain, task, True)
        assert found is not None, "the defaults exist once the writer made them"
        return found

    def _chain(self, tx: Tx, task: EngineTask, create_defaults: bool) -> Resolved | None:
        """None: the principal has no default harnesses yet and `create_defaults` is off."""
        principal_id = task.principal_id
        requested_harness = task.harness_id
        previous_id = task.previous_response_id
        if previous_id is not None:  # an empty id names no response: 404, never "absent"
            previous = response_store.get_response(tx, principal_id, previous_id)
            session = (
                session_store.get_session(tx, principal_id, previous.session_id)
                if previous is not None
                else None
            )
            if previous is None or session is None:
                raise ApiError(
                    404,
                    "response_not_found",
                    "No response with that id.",
                    param="previous_response_id",
                )
            if self.expired(session):
                raise ApiError(
                    404,
                    "session_expired",
                    "The session this response belongs to has expired.",
                    param="previous_response_id",
                )
            if requested_harness is not None and not harness_store.get_harness(
                tx, principal_id, requested_harness
            ):
                raise ApiError(
                    404,
                    "harness_not_found",
                    "No harness with that id.",
                    param="metadata.harness_id",
                )
            if requested_harness is not None and requested_harness != session.harness_id:
                raise ApiError(
                    409,
                    "harness_mismatch",
                    "The session was started with a different harness.",
                    param="metadata.harness_id",
                )
            harness = harness_store.get_harness(tx, principal_id, session.harness_id)
            if harness is None:
                raise ApiError(
                    404,
                    "harness_not_found",
                    "The harness this session used has been deleted.",
                    param="previous_response_id",
                )
            return Resolved(harness, session, previous_id)
        if requested_harness is not None or create_defaults:
            return Resolved(self._named_or_default_harness(tx, principal_id, requested_harness))
        harness = made_default(tx, principal_id, self.bases)
        return Resolved(harness) if harness is not None else None

    def _door_session(self, tx: Tx, task: EngineTask) -> Resolved:
        """The harness, and the UHP session the door's session key maps to (None: a new
        one, bound to the key when the task is accepted) with its latest response."""
        assert task.session is not None
        harness = self._named_or_default_harness(tx, task.principal_id, task.harness_id)
        key = task.session
        session_id = door_sessions.find(
            tx, task.principal_id, harness.id, key.door, key.external_id
        )
        session = session_id and session_store.get_session(tx, task.principal_id, session_id)
        if not session or self.expired(session):
            return Resolved(harness, door_bound_to=session_id)
        responses = session_listing.responses_of(tx, session.id)
        return Resolved(harness, session, responses[-1].id if responses else None)

    def _named_or_default_harness(
        self, tx: Tx, principal_id: str, harness_id: str | None
    ) -> HarnessRow:
        if harness_id is not None:
            harness = harness_store.get_harness(tx, principal_id, harness_id)
            if harness is None:
                raise ApiError(
                    404,
                    "harness_not_found",
                    "No harness with that id.",
                    param="metadata.harness_id",
                )
            return harness
        harness = default_harness(tx, principal_id, self.bases)
        if harness is None:
            raise ApiError(503, "harness_unavailable", "No harness base is enabled on this server.")
        return harness

    def expired(self, session: SessionRow) -> bool:
        idle = time.time() - session.updated_at
        return idle > self.settings.session_retention_days * 86400
