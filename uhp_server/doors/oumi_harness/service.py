"""The Oumi harness protocol's invocations, on the engine.

An invocation is keyed to one UHP session (door session key `oumi-harness` / invocation
id), so every route finds it again through the engine, after a restart too; nothing of the
door is stored beside the session. The Oumi session id rides in the responses' metadata.
The freshest model connection of an invocation is kept in memory only (never stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from uhp_server.doors.oumi_harness.transcript import chat_messages, door_call_id
from uhp_server.doors.oumi_harness.wire import (
    Submission,
    bad_request,
    status_object,
)
from uhp_server.engine import (
    INPUT_REQUIRED,
    Engine,
    EngineTask,
    QuestionPolicy,
    SessionKey,
    TaskState,
    ToolAnswer,
)
from uhp_server.errors import ApiError
from uhp_server.gateway.connection import ModelConnection

DOOR = "oumi-harness"
SESSION_META = "oumi_session_id"
# A submitted invocation whose UHP session was deleted: a 404 would fail the whole
# evaluation, so it reports `failed` (only its row fails) and nothing starts again.
GONE_MESSAGE = (
    "This invocation's session was deleted on the harness server, so its turn can no "
    "longer be reported or continued."
)
# The Oumi session id of recent invocations, to answer for one whose session (and the
# responses that carried the id) was deleted; past this many, or after a restart, unknown.
ROWS_REMEMBERED = 4096
UNKNOWN_SESSION = "unknown"
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
_PATH = re.compile(r"(?<![\w.])(?:/[\w.@+-]+){2,}/?")
_SECRETISH = re.compile(r"\b(?:uhpgw_|sk-)[\w-]{6,}")


class InvocationGone(Exception):
    """The invocation was submitted, but its session has since been deleted."""


class OumiInvocations:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # lock, requests using it
        self._rows: OrderedDict[tuple[str, str], str] = OrderedDict()  # -> Oumi session id

    # -- submit --------------------------------------------------------------------------
    async def submit(self, principal_id: str, harness_id: str, sub: Submission) -> dict[str, Any]:
        """One submission at a time per invocation: a retry racing its original waits."""
        async with self._one_at_a_time(principal_id, sub.invocation_id):
            return await self._submit(principal_id, harness_id, sub)

    @contextlib.asynccontextmanager
    async def _one_at_a_time(self, principal_id: str, invocation_id: str) -> AsyncIterator[None]:
        """The invocation's requests that change it (submissions, a cancel), in turn: a
        cancel sent while its start is still being accepted waits for it, instead of finding
        no invocation."""
        name = f"{principal_id}\0{invocation_id}"
        lock, users = self._locks.get(name, (asyncio.Lock(), 0))
        self._locks[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[name]
            if users == 1:
                del self._locks[name]  # a lock lives only while requests use it
            else:
                self._locks[name] = (lock, users - 1)

    async def _submit(self, principal_id: str, harness_id: str, sub: Submission) -> dict[str, Any]:
        response_id = await self._latest(principal_id, harness_id, sub.invocation_id)
        if response_id is None and await self._gone(principal_id, harness_id, sub.invocation_id):
            return self._gone_status(principal_id, sub.session_id, sub.invocation_id)
        if response_id is None and sub.action == "resume":
            # Oumi resumes only what it submitted: the 404 an unknown invocation gets
            # elsewhere would fail the whole evaluation, where a 400 fails only this row.
            raise bad_request("No invocation with that id to resume.", "invocation_id")
        if response_id is not None:
            await self._same_session(principal_id, response_id, sub.session_id)
        self._remember(principal_id, sub.invocation_id, sub.session_id)  # only once it is ours
        if response_id is None:
            response_id = await self._start(principal_id, harness_id, sub)
        elif sub.action == "start":
            await self._fresh_key(principal_id, response_id, sub.connection)
        else:
            response_id = await self._resume(principal_id, response_id, sub)
        return await self._status(principal_id, response_id, sub.session_id, sub.invocation_id)

    async def _start(self, principal_id: str, harness_id: str, sub: Submission) -> str:
        final = sub.messages[-1]
        task = EngineTask(
            principal_id=principal_id,
            harness_id=harness_id,
            input=final.content or "",
            opening=sub.messages[:-1],
            session=SessionKey(DOOR, sub.invocation_id),
            model_connection=sub.connection,
            questions=QuestionPolicy.pause(),
            metadata={SESSION_META: sub.session_id},
        )
        try:
            accepted = await self.engine.start(task)
        except ApiError as exc:
            if exc.status in (401, 403, 404, 409):  # fatal to the evaluation: the row only
                raise bad_request(exc.message) from None
            raise
        return accepted.response_id

    async def _fresh_key(
        self, principal_id: str, response_id: str, connection: ModelConnection
    ) -> None:
        """A retried submission: its fresh key is the one used from then on."""
        # A retry never fails over its connection: the turn goes on with the last good one.
        with contextlib.suppress(ApiError):
            self.engine.use_connection(response_id, connection)

    async def _resume(self, principal_id: str, response_id: str, sub: Submission) -> str:
        state = await self.engine.state(principal_id, response_id)
        if state.status != INPUT_REQUIRED:
            await self._fresh_key(principal_id, response_id, sub.connection)
            return response_id  # already applied (a retry): the current status
        by_door_id = {door_call_id(response_id, q.call_id): q.call_id for q in state.questions}
        given = [m.tool_call_id or "" for m in sub.messages]  # (the wire requires one)
        if sorted(given) != sorted(by_door_id):
            raise bad_request("A resume must answer each pending tool call exactly once.")
        answers = [
            ToolAnswer(by_door_id[m.tool_call_id or ""], m.content or "") for m in sub.messages
        ]
        try:
            return await self.engine.answer(
                principal_id, response_id, answers, model_connection=sub.connection
            )
        except ApiError as exc:
            # e.g. session_expired: the paused turn cannot go on. Fails the row, never the
            # evaluation (which a 401/403/404 would).
            if exc.status in (401, 403, 404, 409):
                raise bad_request(readable(exc.message)) from None
            raise

    # -- get_status, collect_output, cancel ----------------------------------------------
    async def status(
        self, principal_id: str, harness_id: str, invocation_id: str
    ) -> dict[str, Any]:
        try:
            response_id = await self._known(principal_id, harness_id, invocation_id)
        except InvocationGone:
            session_id = self._rows.get((principal_id, invocation_id), UNKNOWN_SESSION)
            return status_object(session_id, invocation_id, "failed", GONE_MESSAGE)
        state = await self.engine.state(principal_id, response_id)
        status = self._render(state, invocation_id)
        self._remember(principal_id, invocation_id, status["session_id"])
        return status

    async def output(
        self, principal_id: str, harness_id: str, invocation_id: str
    ) -> dict[str, Any]:
        try:
            response_id = await self._known(principal_id, harness_id, invocation_id)
        except InvocationGone:  # `failed`, as get_status says: no output will come
            raise ApiError(409, "output_not_ready", "The turn has no output.") from None
        state = await self.engine.state(principal_id, response_id)
        status = self._render(state, invocation_id)
        if status["status"] not in ("completed", INPUT_REQUIRED):
            raise ApiError(409, "output_not_ready", "The turn has no output yet.")
        pending = {q.call_id for q in state.questions}
        status["messages"] = chat_messages(response_id, state.response["output"], pending)
        status.pop("error", None)
        return status

    async def cancel(
        self, principal_id: str, harness_id: str, session_id: str, invocation_id: str
    ) -> dict[str, Any]:
        async with self._one_at_a_time(principal_id, invocation_id):
            return await self._cancel(principal_id, harness_id, session_id, invocation_id)

    async def _cancel(
        self, principal_id: str, harness_id: str, session_id: str, invocation_id: str
    ) -> dict[str, Any]:
        try:
            response_id = await self._known(principal_id, harness_id, invocation_id)
        except InvocationGone:
            return self._gone_status(principal_id, session_id, invocation_id)
        await self._same_session(principal_id, response_id, session_id)
        state = await self.engine.cancel(principal_id, response_id)
        return self._render(state, invocation_id, session_id)

    async def known(self, principal_id: str, harness_id: str, invocation_id: str) -> bool:
        return await self._latest(principal_id, harness_id, invocation_id) is not None

    # -- helpers -------------------------------------------------------------------------
    async def _latest(self, principal_id: str, harness_id: str, invocation_id: str) -> str | None:
        key = SessionKey(DOOR, invocation_id)
        return await self.engine.latest_in_session(principal_id, harness_id, key)

    async def _gone(self, principal_id: str, harness_id: str, invocation_id: str) -> bool:
        key = SessionKey(DOOR, invocation_id)
        return await self.engine.door_session_gone(principal_id, harness_id, key)

    async def _known(self, principal_id: str, harness_id: str, invocation_id: str) -> str:
        """The invocation's latest response; InvocationGone when its session was deleted,
        404 when it was never submitted."""
        response_id = await self._latest(principal_id, harness_id, invocation_id)
        if response_id is None:
            if await self._gone(principal_id, harness_id, invocation_id):
                raise InvocationGone
            raise ApiError(404, "invocation_not_found", "No invocation with that id.")
        return response_id

    def _remember(self, principal_id: str, invocation_id: str, session_id: str) -> None:
        self._rows[(principal_id, invocation_id)] = session_id
        self._rows.move_to_end((principal_id, invocation_id))
        while len(self._rows) > ROWS_REMEMBERED:
            self._rows.popitem(last=False)

    def _gone_status(
        self, principal_id: str, session_id: str, invocation_id: str
    ) -> dict[str, Any]:
        """`failed` for an invocation whose session was deleted; named under another row's
        session_id than the one it was last seen with, a 400 as `_same_session` gives."""
        known = self._rows.get((principal_id, invocation_id))
        if known is not None and known != session_id:
            raise bad_request("This invocation belongs to another session_id.", "session_id")
        return status_object(session_id, invocation_id, "failed", GONE_MESSAGE)

    async def _same_session(self, principal_id: str, response_id: str, session_id: str) -> None:
        """An invocation belongs to the row it was started for: a request naming it under
        another session_id is refused (a 400 fails only that row), never applied or echoed."""
        state = await self.engine.state(principal_id, response_id)
        started_for = state.response.get("metadata", {}).get(SESSION_META)
        if started_for and started_for != session_id:
            raise bad_request("This invocation belongs to another session_id.", "session_id")

    async def _status(
        self, principal_id: str, response_id: str, session_id: str, invocation_id: str
    ) -> dict[str, Any]:
        state = await self.engine.state(principal_id, response_id)
        return self._render(state, invocation_id, session_id)

    @staticmethod
    def _render(
        state: TaskState, invocation_id: str, session_id: str | None = None
    ) -> dict[str, Any]:
        response = state.response
        session = session_id or response.get("metadata", {}).get(SESSION_META) or ""
        status, error = _protocol_status(state)
        return status_object(session, invocation_id, status, error)


def _protocol_status(state: TaskState) -> tuple[str, str | None]:
    match state.status:
        case "queued" | "completed" | "cancelled" | "failed":
            pass
        case "in_progress":
            return "running", None
        case "input_required":
            return INPUT_REQUIRED, None
        case "incomplete":
            details = state.response.get("incomplete_details") or {}
            reason = details.get("reason")
            if reason == "timeout_seconds":
                return "failed", "The turn ran out of its time budget before it finished."
            return "failed", "The turn reached its step budget before it finished."
        case _:
            return "failed", "The turn ended in an unknown state."
    if state.status != "failed":
        return state.status, None
    error = state.response.get("error") or {}
    return "failed", readable(str(error.get("message") or ""))


def readable(message: str) -> str:
    """A failure message fit to show: no URL, path, key or token in it, at most 1,000
    characters, never empty."""
    cleaned = _URL.sub("[url]", message)
    cleaned = _PATH.sub("[path]", cleaned)
    cleaned = _SECRETISH.sub("[redacted]", cleaned).strip()
    cleaned = cleaned[:1000]
    return cleaned or "The agent's turn failed."
