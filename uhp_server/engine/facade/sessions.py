"""Sessions for every door (Sessions chapter): pages of them, one, its turns, what runs in it
stopped, and the whole of it deleted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage import artifacts as artifact_store
from storage import responses as response_store
from storage import session_listing
from storage import sessions as session_store
from storage.db import Database
from storage.tables import ResponseRow
from storage.unit import Tx
from uhp_server.engine.facade import records, rows
from uhp_server.engine.facade.session_deletion import SessionDeleter
from uhp_server.engine.reading.history import response_now
from uhp_server.engine.tasks.steering import TaskSteering
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.errors import ApiError


def session_not_found() -> ApiError:
    return ApiError(404, "session_not_found", "No session with that id.")


@dataclass(frozen=True)
class SessionCancelled:
    """A session after `POST …/cancel`: its status, and the response that was stopped."""

    id: str
    status: str
    cancelled_response_id: str | None


def turns_of(tx: Tx, runs: RunRegistry, session_id: str) -> list[records.Turn]:
    """The session's turns, oldest first (Sessions §3): the same history for `/turns` and the
    shared page. A deleted response is left out; one not retained shows its id and status."""
    by_response: dict[str, list[records.Artifact]] = {}
    for artifact in artifact_store.for_session(tx, session_id):
        by_response.setdefault(artifact.response_id, []).append(rows.artifact(artifact))
    return [
        _turn(row, response_now(tx, runs, row), by_response.get(row.id, []))
        for row in session_listing.responses_of(tx, session_id)
    ]


def turn_page_of(
    tx: Tx, runs: RunRegistry, session_id: str, limit: int, before: int | None
) -> records.TurnPage:
    """Up to `limit` turns numbered before `before` (None: the latest ones)."""
    total = session_listing.response_count(tx, session_id)
    end = total if before is None else max(0, min(before - 1, total))
    start = max(0, end - limit)
    found = session_listing.responses_slice(tx, session_id, start, end - start)
    by_response: dict[str, list[records.Artifact]] = {}
    if found:
        wanted = {row.id for row in found}
        for artifact in artifact_store.for_session(tx, session_id):
            if artifact.response_id in wanted:
                by_response.setdefault(artifact.response_id, []).append(rows.artifact(artifact))
    turns = [_turn(row, response_now(tx, runs, row), by_response.get(row.id, [])) for row in found]
    return records.TurnPage(turns=turns, first_number=start + 1, total=total)


def _turn(
    row: ResponseRow, response: dict[str, Any] | None, artifacts: list[records.Artifact]
) -> records.Turn:
    return records.Turn(
        id=row.id,
        status=row.status,
        created_at=row.created_at,
        store=row.store,
        input_items=row.input_items,
        response=response,
        artifacts=artifacts,
        environment_id=row.environment_id,
        environment_version=row.environment_version,
    )


class Sessions:
    def __init__(
        self, db: Database, runs: RunRegistry, deleter: SessionDeleter, steering: TaskSteering
    ) -> None:
        self.db = db
        self.runs = runs
        self.deleter = deleter
        self.steering = steering  # a parked task's cancel, the task's own

    async def page(
        self,
        principal_id: str,
        limit: int,
        after: tuple[int, str] | None = None,
        harness_id: str | None = None,
        status: str | None = None,
        text: str | None = None,
    ) -> tuple[list[records.Session], bool]:
        """Up to `limit` sessions after the (created_at, id) position, newest first; and
        whether more follow. Only those of `harness_id`, in `status`, whose title holds
        `text` (any case), when given."""
        found, more = await self.db.read(
            session_listing.page, principal_id, limit, after, harness_id, status, text
        )
        return [rows.session(row) for row in found], more

    async def get(self, principal_id: str, session_id: str) -> records.Session:
        """The principal's session (404 session_not_found for another's, or a deleted one)."""
        row = await self.db.read(session_store.get_session, principal_id, session_id)
        if row is None:
            raise session_not_found()
        return rows.session(row)

    async def turns(self, principal_id: str, session_id: str) -> list[records.Turn]:
        """The session's history, oldest first."""
        session = await self.get(principal_id, session_id)
        return await self.db.read(turns_of, self.runs, session.id)

    async def turn_page(
        self, principal_id: str, session_id: str, limit: int, before: int | None = None
    ) -> records.TurnPage:
        """Up to `limit` of the session's turns, the latest ones, or those numbered before
        `before` (its first turn is 1): a page of a long history, read without the rest."""
        session = await self.get(principal_id, session_id)
        return await self.db.read(turn_page_of, self.runs, session.id, limit, before)

    async def cancel(self, principal_id: str, session_id: str) -> SessionCancelled:
        """Stop the task of the session, on whichever replica (idempotent): the turn running
        in it, or one parked on its agent's question, whose questions are withdrawn as a
        cancel of the task itself withdraws them (engine/tasks/steering.py)."""
        session = await self.get(principal_id, session_id)
        await self.runs.end_warm(session.id)  # a process kept warm for its next turn too
        run = self.runs.for_session(session.id)
        if run is not None and not run.log.finished:
            # The registry's own cancel: the turn stops even when its response was deleted
            # meanwhile (deleting never cancels, so the turn may still run unstored).
            await self.runs.cancel(run)
            return SessionCancelled(session.id, run.log.current()["status"], run.response_id)
        if run is None and session.active_response_id:  # it runs on another replica
            running_id = session.active_response_id  # the session forgets it once stopped
            await self.runs.peers.relay_cancel(running_id)
            session = await self.get(principal_id, session_id)
            return SessionCancelled(session.id, session.status, running_id)
        latest = await self.latest_response(principal_id, session.id)
        if latest is not None and await self._parked(principal_id, latest):
            cancelled = await self.steering.cancel(principal_id, latest)
            return SessionCancelled(session.id, cancelled.status, latest)
        status = run.log.current()["status"] if run is not None else session.status
        return SessionCancelled(session.id, status, None)

    async def _parked(self, principal_id: str, response_id: str) -> bool:
        """Whether the task waits parked on its questions, nothing carrying it on or closing
        it yet (a cancel's closing turn, a new turn with the answers)."""
        if not (await self.steering.state(principal_id, response_id)).parked:
            return False
        return not await self.db.read(response_store.successors, principal_id, response_id)

    async def delete(self, principal_id: str, session_id: str) -> str:
        """Cancel what runs, then delete the session and everything it holds (Sessions §6);
        its id."""
        session = await self.get(principal_id, session_id)
        await self.deleter.delete(session.id)
        return session.id

    async def latest_response(self, principal_id: str, session_id: str) -> str | None:
        """The id of the session's latest response (None: it has none yet); 404
        session_not_found when there is no such session."""

        def look(tx: Tx) -> str | None:
            if session_store.get_session(tx, principal_id, session_id) is None:
                raise session_not_found()
            return response_store.latest_in_session(tx, session_id)

        return await self.db.read(look)
