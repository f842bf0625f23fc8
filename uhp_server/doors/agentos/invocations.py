"""Running AgentOS invocations as tasks: start, suspend on a question, resume, finish.

A run is one UHP task (keyed by `run_id`: a repeated start finds the task it began and never
runs it twice; `invocation.id` changes on every resume and keys nothing). The run's
`session_id` maps to one UHP session per principal, harness and id, so runs of a session
share its conversation and workspace. Every model call goes to `context.llm.base_url`
through the turn's per-turn connection with `x-agentos-run-token: <context.token>`.

The token belongs to one invocation: it lives in memory on the run's record only while that
invocation is being answered (the hold callback needs it), is dropped the moment the answer
is ready, and the next invocation's token replaces it (and the paused turn's connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import httpx

from uhp_server.doors.agentos import contract
from uhp_server.doors.agentos.contract import BadInvocation, Invocation
from uhp_server.doors.agentos.holds import RUN_TOKEN_HEADER, HoldFailed, open_hold
from uhp_server.doors.agentos.models import model_for
from uhp_server.doors.harness_result import failure_reason
from uhp_server.doors.tool_runs import task_result, until_terminal
from uhp_server.engine import (
    INPUT_REQUIRED,
    PARK_ENDING_SECONDS,
    PARK_HEARD_SECONDS,
    Engine,
    EngineTask,
    Question,
    QuestionPolicy,
    SessionKey,
    ToolAnswer,
)
from uhp_server.errors import ApiError
from uhp_server.gateway.connection import ModelConnection

SESSION_DOOR = "agentos"
# Answers kept for a repeated attempt of an invocation (same run, same `invocation.id`): it
# gets the first attempt's answer — the same hold, the same result — and nothing runs again.
ANSWERS_KEPT = 1024
RUN_ID_METADATA = "agentos_run_id"  # on each response of a run, carried to its continuations
# "A run has at most 100 invocations": so many responses at most carry one run on.
MOST_INVOCATIONS = 100
# How long a resume keeps trying while another replica is slow to park the run's paused turn.
RESUME_PATIENCE_SECONDS = 60.0


def run_key(run_id: str) -> str:
    """The idempotency key (and fingerprint) of a run's task: one task per run."""
    return f"agentos:{run_id}"


@dataclass(eq=False)
class RunRecord:
    """What this server keeps of one AgentOS run while it lives (memory only)."""

    run_id: str
    response_id: str = ""
    token: str = field(default="", repr=False)  # the current invocation's, while it is answered
    api_url: str = ""
    # Set by the hold callback: the id of the hold it opened, or the HoldFailed it met.
    suspended: asyncio.Future[str] | None = None


class AgentosRuns:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._runs: dict[str, RunRecord] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._answered: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()

    async def invoke(
        self, principal_id: str, invocation: Invocation, base_url: str
    ) -> dict[str, Any]:
        """Answer one invocation; `base_url`: the origin artifact download links are on."""
        if invocation.capability != contract.CAPABILITY:
            return contract.failed(
                "unknown_capability",
                f"This agent serves the capability 'run', not '{invocation.capability[:60]}'.",
            )
        lock = self._locks.setdefault(invocation.run_id, asyncio.Lock())
        async with lock:  # one invocation of a run at a time
            attempt = (invocation.run_id, invocation.invocation_id)
            if invocation.invocation_id and attempt in self._answered:
                return self._answered[attempt]  # a repeated attempt: the first one's answer
            record = self._runs.setdefault(invocation.run_id, RunRecord(invocation.run_id))
            record.token, record.api_url = invocation.token, invocation.api_url
            record.suspended = asyncio.get_running_loop().create_future()
            answer = contract.failed("internal_error", "The agent failed inside the server.")
            try:
                answer = await self._invoke(principal_id, invocation, record, base_url)
            except ApiError as exc:
                answer = contract.failed(exc.code, str(exc))
            except BadInvocation as bad:
                answer = contract.failed(bad.code, bad.message)
            finally:
                record.token = ""  # answered: the token is not used again
                record.suspended = None
                if answer["status"] != "suspended":  # the run is over: nothing left to keep
                    self._runs.pop(invocation.run_id, None)
                    self._locks.pop(invocation.run_id, None)
            if invocation.invocation_id:
                self._remember(attempt, answer)
            return answer

    def _remember(self, attempt: tuple[str, str], answer: dict[str, Any]) -> None:
        self._answered[attempt] = answer
        while len(self._answered) > ANSWERS_KEPT:
            self._answered.popitem(last=False)

    async def _invoke(
        self, principal_id: str, invocation: Invocation, record: RunRecord, base_url: str
    ) -> dict[str, Any]:
        harness_id = invocation.input.get("harness_id")
        if harness_id is not None and not isinstance(harness_id, str):
            raise BadInvocation("invalid_input", "input.harness_id must be a string.")
        model = await model_for(self.engine, principal_id, harness_id, invocation.models)
        connection = ModelConnection(
            base_url=invocation.llm_base_url,
            model=model,
            api_key=invocation.llm_api_key or "agentos",
            headers={RUN_TOKEN_HEADER: invocation.token},
        )
        if invocation.kind == "resume":
            response_id = await self._resume(principal_id, invocation, record, connection)
        else:
            response_id = await self._start(principal_id, invocation, record, connection, base_url)
        record.response_id = response_id
        return await self._outcome(principal_id, record, base_url)

    async def _start(
        self,
        principal_id: str,
        invocation: Invocation,
        record: RunRecord,
        connection: ModelConnection,
        base_url: str,
    ) -> str:
        prompt = invocation.input.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise BadInvocation("invalid_input", "input.prompt must be a non-empty string.")
        harness_id = invocation.input.get("harness_id")
        task = EngineTask(
            principal_id=principal_id,
            harness_id=harness_id,
            input=prompt,
            session=SessionKey(SESSION_DOOR, invocation.session_id)
            if invocation.session_id
            else None,
            model_connection=connection,
            questions=self._questions(invocation, record),
            metadata={RUN_ID_METADATA: invocation.run_id[:200]},
        )
        # Keyed by run_id: a start the platform repeats finds this run's task, never a second.
        key = run_key(invocation.run_id)
        accepted = await self.engine.start(
            task, idempotency_key=key, fingerprint=key, base_url=base_url
        )
        return accepted.response_id

    def _questions(self, invocation: Invocation, record: RunRecord) -> QuestionPolicy:
        if invocation.eval is not None:
            # An experiment run: nobody reviews holds; the recorded decisions answer, in order.
            recorded = invocation.eval.get("recorded_holds")
            if not isinstance(recorded, list):
                recorded = []  # absent, or not the contract's list: nothing recorded to answer
            answers = tuple(
                contract.decision_text(hold.get("decision") if isinstance(hold, dict) else hold)
                for hold in recorded
            )
            return QuestionPolicy.recorded_answers(answers)

        async def open_a_hold(question: Question) -> str | None:
            await self._hold(record, question)
            return None  # the turn waits; the invocation answers `suspended`

        return QuestionPolicy.hold(open_a_hold)

    async def _hold(self, record: RunRecord, question: Question) -> None:
        waiting = record.suspended
        if waiting is None or waiting.done():
            return  # no invocation is being answered: the question waits for the next one
        if not record.token or not record.api_url:
            waiting.set_exception(HoldFailed("The invocation named no api_url for holds."))
            return
        try:
            async with httpx.AsyncClient() as http:
                hold_id = await open_hold(
                    http,
                    record.api_url,
                    record.token,
                    question.text,
                    record.run_id,
                    allow_private=self.engine.settings.model_connection_allow_private_hosts,
                )
        except HoldFailed as exc:
            if not waiting.done():
                waiting.set_exception(exc)
            return
        if not waiting.done():
            waiting.set_result(hold_id)

    async def _resume(
        self,
        principal_id: str,
        invocation: Invocation,
        record: RunRecord,
        connection: ModelConnection,
    ) -> str:
        # After a restart the record is gone: the run's key still finds its task. A run this
        # server never started is refused, never started by its resume.
        key = run_key(invocation.run_id)
        response_id = record.response_id or await self.engine.idempotent_response(
            principal_id, key, key
        )
        if response_id is None:
            raise BadInvocation(
                "unknown_run", "No run with this run_id was started by this agent to resume."
            )
        # The platform never repeats an invocation it sent, so the door tries again itself
        # while the replica running a paused turn is slow to park it (a 503).
        deadline = time.monotonic() + RESUME_PATIENCE_SECONDS
        text = contract.decision_text(invocation.resume)
        while True:
            response_id = await self._carried_on(principal_id, response_id, invocation.run_id)
            state = await self.engine.state(principal_id, response_id)
            if state.status != INPUT_REQUIRED:
                return response_id  # nothing waits on a decision: report where the run stands
            answers = [ToolAnswer(q.call_id, text) for q in state.questions]
            try:
                # A run paused on another replica goes on here in a new turn (its token
                # cannot follow the answer there), holding its questions as this invocation's.
                return await self.engine.answer(
                    principal_id,
                    response_id,
                    answers,
                    model_connection=connection,
                    questions=self._questions(invocation, record),
                )
            except ApiError as exc:
                # Another attempt only while a whole one (its waits for the other replica)
                # still fits in the patience.
                again = time.monotonic() + PARK_HEARD_SECONDS + PARK_ENDING_SECONDS < deadline
                if (exc.status, exc.code) != (503, "server_error") or not again:
                    raise
            await asyncio.sleep(1.0)

    async def _carried_on(self, principal_id: str, response_id: str, run_id: str) -> str:
        """The run's response now: a turn parked on a decision goes on in a new response, maybe
        started by another replica (this one's record then names one before it). Of the
        responses that follow one, the run's is the one carrying its id: a later run of the
        same AgentOS session follows it in the same UHP session too."""
        for _ in range(MOST_INVOCATIONS):
            following = await self.engine.successors(principal_id, response_id)
            ours = [
                rid for rid, metadata in following if metadata.get(RUN_ID_METADATA) == run_id[:200]
            ]
            if not ours:
                break
            response_id = ours[-1]
        return response_id

    async def _outcome(self, principal_id: str, record: RunRecord, base_url: str) -> dict[str, Any]:
        """Wait for the task's end or its question's hold; the answer for the platform."""
        assert record.suspended is not None
        finished: asyncio.Future[Any] = asyncio.ensure_future(
            until_terminal(self.engine, principal_id, record.response_id)
        )
        try:
            waits: set[asyncio.Future[Any]] = {finished, record.suspended}
            await asyncio.wait(waits, return_when="FIRST_COMPLETED")
        finally:
            if not finished.done():
                finished.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await finished
        if record.suspended.done():
            try:
                return contract.suspended(record.suspended.result())
            except HoldFailed as exc:
                await self.engine.cancel(principal_id, record.response_id)
                return contract.failed("hold_failed", str(exc))
        state = await self.engine.state(principal_id, record.response_id)
        if state.status == INPUT_REQUIRED:  # asked outside an invocation (cannot hold now)
            return contract.failed("asked_for_human", "The agent is waiting for an answer.")
        response = state.response
        if response["status"] in ("failed", "cancelled"):
            code = (response.get("error") or {}).get("code") or response["status"]
            return contract.failed(code, failure_reason(response))
        return contract.completed(await task_result(self.engine, response, base_url))
