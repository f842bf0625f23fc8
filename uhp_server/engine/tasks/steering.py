"""Reading and steering accepted tasks, for every door: state, events, cancel, answers.

Kept apart from accepting tasks (engine/tasks/intake.py), which it is given to carry a parked task
on in a new turn. Doors reach these through the engine's facade (engine/engine.py), never
through storage or the run registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from harness_bases.base import HarnessBase
from storage import door_sessions, session_listing
from storage import harnesses as harness_store
from storage import responses as response_store
from storage import sessions as session_store
from storage.db import Database
from storage.tables import ResponseRow
from storage.unit import Tx
from uhp_server.engine.reading.history import user_text
from uhp_server.engine.reading.read_back import (
    current_response,
    follow_events,
    task_state,
    unretained_response,
)
from uhp_server.engine.requests import (
    INPUT_REQUIRED,
    EngineTask,
    QuestionPolicy,
    SessionKey,
    TaskState,
    TaskStatus,
    ToolAnswer,
)
from uhp_server.engine.tasks.intake import TaskIntake
from uhp_server.engine.tasks.parked import withdraw_parked
from uhp_server.engine.turns.questions import (
    answered_questions,
    answers_prompt,
    pending_questions,
)
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.engine.turns.run import Run
from uhp_server.errors import VENDOR, ApiError
from uhp_server.gateway.connection import ModelConnection, connection_provider
from uhp_server.settings import Settings

# How long an answer for a turn that parked on another replica waits for its end.
PARKING_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class Cancelled(TaskState):
    """What a cancel leaves: the task's state (a parked task's is that of the closing
    `cancelled` turn after it), and `cancelled`, the cancelled response itself as its reader
    may see it now (a `store: false` one that had already ended shows no content)."""

    cancelled: dict[str, Any] = field(default_factory=dict)


class TaskSteering:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        bases: dict[str, HarnessBase],
        runs: RunRegistry,
        intake: TaskIntake,
    ) -> None:
        self.settings = settings
        self.db = db
        self.bases = bases
        self.runs = runs
        self.intake = intake

    async def started(self, response_id: str) -> None:
        await self.intake.started(response_id)

    async def state(self, principal_id: str, response_id: str) -> TaskState:
        """The task as it stands (404 response_not_found for another principal's)."""
        await self.started(response_id)
        row = await self._row(principal_id, response_id)
        return await self.db.read(task_state, self.runs, row)

    async def follow(
        self, principal_id: str, response_id: str, after: int = -1
    ) -> AsyncIterator[dict[str, Any]]:
        """The task's events after `after`, live until the terminal one, or as stored."""
        await self.started(response_id)
        row = await self._row(principal_id, response_id)
        async for event in follow_events(self.db, self.runs, row, after):
            yield event

    async def cancel(self, principal_id: str, response_id: str) -> Cancelled:
        """Stop the task (a queued one leaves the queue at once; one running on another
        replica is stopped there); a parked one's questions are withdrawn, so it ends
        `cancelled` in a closing turn after it. Cancelling an ended task changes nothing."""
        await self.started(response_id)
        row = await self._row(principal_id, response_id)
        run = self.runs.get(row.id)
        cancelled_here = run is not None and not run.log.finished
        if run is not None and cancelled_here:
            await self.runs.cancel(run)
        elif run is not None:  # it completed: the process it kept warm, if any, ends
            await self.runs.end_warm_after(run.response_id)
        elif run is None and row.status == "in_progress":  # it runs on another replica
            await self.runs.peers.relay_cancel(row.id)
            row = await self._row(principal_id, response_id)
        state = await self.db.read(task_state, self.runs, row)
        seen = await self._cancelled_response(row, run, cancelled_here)
        if state.parked:
            # Parked: the task ends `cancelled` in a closing turn after it.
            closing = await withdraw_parked(
                self.db, row, state.response, replica_id=self.runs.replica_id
            )
            if not row.store:  # nothing of the closing turn is kept to read back but its row
                closing_row = await self._row(principal_id, closing)
                state = TaskState(TaskStatus(closing_row.status), unretained_response(closing_row))
            else:
                state = await self.state(principal_id, closing)
        return Cancelled(state.status, state.response, state.questions, cancelled=seen)

    async def _cancelled_response(
        self, row: ResponseRow, run: Run | None, cancelled_here: bool
    ) -> dict[str, Any]:
        """The cancelled response as its reader sees it. A `store: false` one that ended
        shows its partial output to the cancel that stopped it (as its own stream would),
        and only what is known without its content to any later one (Sessions §4)."""
        if not row.store and (run is None or run.log.finished):
            if cancelled_here and run is not None:
                return run.log.current()
            return unretained_response(row)
        if run is not None and (row.store or not run.log.finished):
            return run.log.current()
        return await self.db.read(current_response, self.runs, row)

    async def time_out(self, principal_id: str, response_id: str, seconds: float) -> TaskState:
        """End the task now as `incomplete` with the timeout reason: a caller's deadline of
        `seconds` fired before the turn's own budget. Its state afterwards."""
        await self.started(response_id)
        row = await self._row(principal_id, response_id)
        run = self.runs.get(row.id)
        details = {"reason": "timeout_seconds", "timeout_seconds": seconds}
        if run is not None and not run.log.finished:
            await self.runs.time_out(run, details)
        elif run is None and row.status == "in_progress":  # it runs on another replica
            await self.runs.peers.relay_cancel(row.id, details)
            row = await self._row(principal_id, response_id)
        return await self.db.read(task_state, self.runs, row)

    async def answer(
        self,
        principal_id: str,
        response_id: str,
        answers: list[ToolAnswer],
        *,
        model_connection: ModelConnection | None = None,
        questions: QuestionPolicy | None = None,
    ) -> str:
        """Answer the questions a paused task waits on (one answer per pending call). The
        answers reach the agent as its question tool's results and the turn goes on; returns
        the id of the response that carries on (this one while its turn is still alive).
        `model_connection`, when given, is the one used from then on; `questions`, how a new
        turn carrying the task on takes its own questions (by default as the paused one did,
        or paused when that turn is not in this replica's memory)."""
        await self.started(response_id)
        row = await self._row(principal_id, response_id)
        state = await self.db.read(task_state, self.runs, row)
        if state.status != INPUT_REQUIRED:
            row, state = await self._after_parking(principal_id, row, state, answers)
        if state.status != INPUT_REQUIRED:
            raise ApiError(409, "not_waiting", "This task is not waiting for an answer.")
        pending = sorted(q.call_id for q in state.questions)
        if sorted(a.call_id for a in answers) != pending:
            raise ApiError(
                400, "invalid_input", "Give exactly one answer for each pending question."
            )
        run = self.runs.get(row.id)
        if run is not None and run.asking and not run.parked:
            if model_connection is not None:
                allow = self.settings.model_connection_allow_private_hosts
                self.runs.switch_connection(run, connection_provider(model_connection, allow))
            self.runs.deliver_answers(run, answers)
            return row.id
        if run is None and row.status == "in_progress":  # paused on another replica
            # A connection's key is never stored, so it cannot follow the answers to the
            # turn's replica: that turn parks, and goes on here in a new turn with it.
            parking = model_connection is not None and await self.runs.peers.park_elsewhere(
                row.id, pending
            )
            if not parking:
                if model_connection is None and await self.runs.peers.relay_answers(
                    row.id, answers
                ):
                    return row.id
                # It parked (or was answered) meanwhile: once its turn has ended, a parked
                # one goes on in a new turn as below.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self.runs.peers.wait_finished(row.id), PARKING_WAIT_SECONDS
                    )
            row = await self._row(principal_id, response_id)
            state = await self.db.read(task_state, self.runs, row)
            if parking and row.status == "in_progress":
                # Its replica did not take the request in time (it was withdrawn, the turn
                # still waits), or its turn is still ending: a retry finds which.
                raise ApiError(
                    503,
                    "server_error",
                    "The replica running this task did not park it in time; try again.",
                    headers={"Retry-After": "1"},
                )
            asked = sorted(q.call_id for q in state.questions)
            if state.status != INPUT_REQUIRED or row.status == "in_progress" or asked != pending:
                raise ApiError(409, "not_waiting", "This task is not waiting for an answer.")
        # The paused process is gone (kept long enough, or the server restarted): a new turn
        # resumes the CLI's conversation and tells the agent the answers.
        continuation = EngineTask(
            principal_id=principal_id,
            harness_id=None,
            input=await self._answers_prompt(row, state, answers),
            previous_response_id=row.id,
            model_connection=model_connection,
            questions=questions or (run.questions if run is not None else QuestionPolicy.pause()),
            store=row.store,
            metadata={
                k: v
                for k, v in state.response.get("metadata", {}).items()
                if k not in ("session_id", "harness_id")
            },
        )
        # Keyed by the parked response: of two answers carrying it on at once (two replicas,
        # a door's retry), one starts the new turn and the other is given its id; unless
        # they answer differently: the second is refused, not dropped in silence.
        key = response_store.CARRY_ON_KEY + row.id
        try:
            accepted = await self.intake.start(
                continuation, idempotency_key=key, fingerprint=key + ":" + _digest(answers)
            )
        except ApiError as refused:
            if refused.code != VENDOR + "idempotency_key_reused":
                raise
            raise ApiError(
                409, "not_waiting", "This task was already answered, with other answers."
            ) from None
        return accepted.response_id

    async def _after_parking(
        self, principal_id: str, row: ResponseRow, state: TaskState, answers: list[ToolAnswer]
    ) -> tuple[ResponseRow, TaskState]:
        """The task read again once its turn on another replica ended, when that turn is being
        parked for another answer to these same questions right now: its runner took the
        request (the questions no longer wait) and has not recorded its end. An answer given
        twice at once (a door's retry, two replicas given the same resume) then carries the
        task on with the first, as the first waits for that end too."""
        elsewhere = self.runs.get(row.id) is None and row.status == "in_progress"
        asked = sorted(q.call_id for q in pending_questions(state.response))
        if not (elsewhere and asked and asked == sorted(a.call_id for a in answers)):
            return row, state
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.runs.peers.wait_finished(row.id), PARKING_WAIT_SECONDS)
        row = await self._row(principal_id, row.id)
        return row, await self.db.read(task_state, self.runs, row)

    async def _answers_prompt(
        self, row: ResponseRow, state: TaskState, answers: list[ToolAnswer]
    ) -> str:
        """The carrying-on turn's prompt. A CLI that took the stopped turn back out of its
        conversation (`forgets_unfinished_turns`) is also given the turn's request and the
        answers the user gave earlier in it: the answer alone would lack them."""
        harness_id = state.response.get("metadata", {}).get("harness_id")
        harness = await self.db.read(harness_store.get_harness, row.principal_id, str(harness_id))
        base = self.bases.get(harness.base) if harness is not None else None
        if base is None or not base.forgets_unfinished_turns:
            return answers_prompt(state.questions, answers)
        earlier = answered_questions(state.response)
        return answers_prompt(
            state.questions, answers, request=user_text(row.input_items), answered_before=earlier
        )

    def use_connection(self, response_id: str, connection: ModelConnection) -> None:
        """A door's fresher model connection for a task still running: used from now on."""
        run = self.runs.get(response_id)
        if run is not None and not run.log.finished:
            allow = self.settings.model_connection_allow_private_hosts
            self.runs.switch_connection(run, connection_provider(connection, allow))

    async def latest_in_session(
        self, principal_id: str, harness_id: str, key: SessionKey
    ) -> str | None:
        """The latest response of the UHP session a door's session key maps to, if any."""
        return await self.db.read(self._latest_in_session, principal_id, harness_id, key)

    async def door_session_gone(self, principal_id: str, harness_id: str, key: SessionKey) -> bool:
        """Whether the door's key was mapped to a session that has since been deleted (a key
        never mapped is not gone: it is unknown)."""

        def look(tx: Tx) -> bool:
            session_id = door_sessions.find(tx, principal_id, harness_id, key.door, key.external_id)
            if session_id is None:
                return False
            return session_store.get_session(tx, principal_id, session_id) is None

        return await self.db.read(look)

    @staticmethod
    def _latest_in_session(
        tx: Tx, principal_id: str, harness_id: str, key: SessionKey
    ) -> str | None:
        session_id = door_sessions.find(tx, principal_id, harness_id, key.door, key.external_id)
        if session_id is None or not session_store.get_session(tx, principal_id, session_id):
            return None
        responses = session_listing.responses_of(tx, session_id)
        return responses[-1].id if responses else None

    async def _row(self, principal_id: str, response_id: str) -> ResponseRow:
        row = await self.db.read(response_store.get_response, principal_id, response_id)
        if row is None:
            raise ApiError(404, "response_not_found", "No response with that id.")
        return row


def _digest(answers: list[ToolAnswer]) -> str:
    """What the answers say, as one short text: the same for the same answers in any order."""
    said = sorted((a.call_id, a.output) for a in answers)
    return hashlib.sha256(json.dumps(said).encode()).hexdigest()[:32]
