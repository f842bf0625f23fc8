"""The engine's one way in: every door (UHP, Chat Completions, the Oumi harness protocol, the
Oumi tools, AgentOS) calls these and nothing else — never storage, never the run registry.

A door translates its contract's request into an `EngineTask`, starts it, then reads and
steers it by response id: its state, its events, a cancel, the answers to its questions, a
deadline. The rest of what a door shows hangs off the facade by chapter: `sessions`, `files`,
`shares`, `harnesses`, `principals`, `sign_ins`, `usage`, `environments` and `memories`.
Which door called is never known here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from harness_bases.base import HarnessBase
from storage import artifacts as artifact_store
from storage import door_sessions
from storage import responses as response_store
from storage.db import Database
from storage.tables import ResponseRow
from storage.unit import Tx
from uhp_server.engine.facade.agent_memories import AgentMemories
from uhp_server.engine.facade.environments import Environments
from uhp_server.engine.facade.files import Files
from uhp_server.engine.facade.harnesses import Harnesses
from uhp_server.engine.facade.memories import Memories
from uhp_server.engine.facade.memory_tools import MemoryTools
from uhp_server.engine.facade.principals import Principals
from uhp_server.engine.facade.records import TurnFile
from uhp_server.engine.facade.sessions import Sessions
from uhp_server.engine.facade.shares import Shares
from uhp_server.engine.facade.sign_ins import SignIns
from uhp_server.engine.facade.usage import Usage
from uhp_server.engine.reading.read_back import (
    answers_live,
    current_response,
    follow_events,
    unretained_response,
)
from uhp_server.engine.requests import EngineTask, QuestionPolicy, SessionKey, TaskState, ToolAnswer
from uhp_server.engine.tasks.intake import Accepted, TaskIntake
from uhp_server.engine.tasks.steering import Cancelled, TaskSteering
from uhp_server.engine.turns.files import download_url
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.errors import ApiError
from uhp_server.gateway.connection import ModelConnection
from uhp_server.settings import Settings


def response_not_found(message: str = "No response with that id.") -> ApiError:
    return ApiError(404, "response_not_found", message)


def not_retained() -> ApiError:
    return response_not_found("That response was not retained.")


class Engine:
    def __init__(
        self,
        *,
        settings: Settings,
        bases: dict[str, HarnessBase],
        db: Database,
        runs: RunRegistry,
        intake: TaskIntake,
        steering: TaskSteering,
        sessions: Sessions,
        files: Files,
        shares: Shares,
        harnesses: Harnesses,
        principals: Principals,
        sign_ins: SignIns,
        usage: Usage,
        environments: Environments,
        memories: Memories,
        agent_memories: AgentMemories,
        memory_tools: MemoryTools,
    ) -> None:
        self.settings = settings
        self.bases = bases  # the enabled and installed ones, by name
        self.sessions = sessions
        self.files = files
        self.shares = shares
        self.harnesses = harnesses
        self.principals = principals
        self.sign_ins = sign_ins  # a browser's session, made from a key
        self.usage = usage  # turns and tokens per harness per day
        self.environments = environments
        # Served unless UHP_MEMORIES=off (doors/uhp/chapters.py).
        self.memories = memories
        self.agent_memories = agent_memories  # a harness's agent and its memories (§9)
        self.memory_tools = memory_tools  # the tools its turns hold (gateway/memory_server.py)
        self._db = db
        self._runs = runs
        self._intake = intake
        self._steering = steering

    # -- starting a task ---------------------------------------------------------------------
    async def start(
        self,
        task: EngineTask,
        *,
        idempotency_key: str | None = None,
        fingerprint: str | None = None,
        base_url: str = "",
    ) -> Accepted:
        """Accept a task and start its turn. `base_url` is the origin the client used
        (artifact links use it); `fingerprint` with `idempotency_key` identifies the request
        for an idempotent repeat, which is given the first request's response."""
        return await self._intake.start(
            task, idempotency_key=idempotency_key, fingerprint=fingerprint, base_url=base_url
        )

    async def idempotent_response(self, principal_id: str, key: str, print_: str) -> str | None:
        """The response a request with this idempotency key (and fingerprint) created, while
        it is remembered; 409 for the key with another fingerprint."""
        return await self._intake.idempotent_response(principal_id, key, print_)

    async def started(self, response_id: str) -> None:
        """Wait while a task with this id is being accepted (a repeat can find its record a
        moment before its run is registered)."""
        await self._intake.started(response_id)

    # -- reading it back -----------------------------------------------------------------
    async def state(self, principal_id: str, response_id: str) -> TaskState:
        """The task as it stands (404 response_not_found for another principal's)."""
        return await self._steering.state(principal_id, response_id)

    def follow(
        self, principal_id: str, response_id: str, after: int = -1
    ) -> AsyncIterator[dict[str, Any]]:
        """The task's events after `after`, live until the terminal one, or as stored."""
        return self._steering.follow(principal_id, response_id, after)

    async def response(self, principal_id: str, response_id: str) -> dict[str, Any]:
        """The response as it stands: live from its run, else its stored final form (404 for
        a `store: false` one that has ended)."""
        row = await self._row(principal_id, response_id)
        return await self._current(row)

    async def check(self, principal_id: str, response_id: str) -> None:
        """404 response_not_found unless the principal has this response."""
        await self._row(principal_id, response_id)

    async def result(self, principal_id: str, response_id: str, *, wait: bool) -> dict[str, Any]:
        """What an idempotent repeat of the request that made the response is given: the
        response, once it has ended when `wait`. A `store: false` one that has ended gives
        what was retained, its id and status (Tasks §6 wants the first result; §4 lets the
        content go)."""
        await self.started(response_id)  # a repeat may find it mid-acceptance
        row = await self._row(principal_id, response_id)
        if not self._readable(row):
            return unretained_response(row)
        if wait:
            run = self._runs.get(row.id)
            if run is not None:
                await run.log.wait_finished()
                row = await self._row(principal_id, response_id)  # deleted meanwhile?
            elif row.status == "in_progress":  # it runs on another replica
                await self._runs.peers.wait_finished(row.id)
                row = await self._row(principal_id, response_id)
        return await self._current(row, replay=True)

    async def events(
        self, principal_id: str, response_id: str, after: int = -1
    ) -> AsyncIterator[dict[str, Any]]:
        """The response's events after `after`, live until the terminal one; 404 at once
        (before any event) for one whose content was not retained."""
        await self.started(response_id)
        row = await self._row(principal_id, response_id)
        if not self._readable(row):
            raise not_retained()
        return follow_events(self._db, self._runs, row, after)

    async def input_items(self, principal_id: str, response_id: str) -> list[dict[str, Any]]:
        """The input the task was created with, oldest first (404 when not retained)."""
        row = await self._row(principal_id, response_id)
        if not row.store:
            raise not_retained()
        return row.input_items

    async def successors(
        self, principal_id: str, response_id: str
    ) -> list[tuple[str, dict[str, Any]]]:
        """The responses that follow this one in its session, oldest first, each with the
        metadata it was created with: for a parked one, the new turn that carried it on (on
        whichever replica took the answer), and maybe later tasks of the session."""
        return await self._db.read(response_store.successors, principal_id, response_id)

    async def turn_files(self, response_id: str, base_url: str) -> list[TurnFile]:
        """The artifacts the response's turn produced, linked on `base_url`."""

        def look(tx: Tx) -> list[TurnFile]:
            rows = artifact_store.for_response(tx, response_id)
            return [TurnFile(r.filename, r.bytes, download_url(base_url, r)) for r in rows]

        return await self._db.read(look)

    # -- steering it -----------------------------------------------------------------------
    async def cancel(self, principal_id: str, response_id: str) -> Cancelled:
        """Stop the task, on whichever replica runs it; a parked one's questions are
        withdrawn (it ends `cancelled` in a closing turn). Idempotent; the terminal event is
        written before this returns."""
        return await self._steering.cancel(principal_id, response_id)

    async def time_out(self, principal_id: str, response_id: str, seconds: float) -> TaskState:
        """End the task now as `incomplete` with the timeout reason: a caller's deadline of
        `seconds` fired before the turn's own budget."""
        return await self._steering.time_out(principal_id, response_id, seconds)

    async def answer(
        self,
        principal_id: str,
        response_id: str,
        answers: list[ToolAnswer],
        *,
        model_connection: ModelConnection | None = None,
        questions: QuestionPolicy | None = None,
    ) -> str:
        """Answer the questions a paused task waits on; the id of the response that carries
        on (this one while its turn is still alive, else a new turn's)."""
        return await self._steering.answer(
            principal_id,
            response_id,
            answers,
            model_connection=model_connection,
            questions=questions,
        )

    def use_connection(self, response_id: str, connection: ModelConnection) -> None:
        """A door's fresher model connection for a task still running: used from now on."""
        self._steering.use_connection(response_id, connection)

    async def delete_response(self, principal_id: str, response_id: str) -> str:
        """Delete the stored response; never cancels (Tasks §7): a running turn goes on,
        unstored. Its id."""
        row = await self._row(principal_id, response_id)
        run = self._runs.get(row.id)
        if run is not None:
            run.log.persist = False
        await self._db.write(response_store.delete_response, row.id)
        return row.id

    # -- a door's own session keys ---------------------------------------------------------
    async def latest_in_session(
        self, principal_id: str, harness_id: str, key: SessionKey
    ) -> str | None:
        """The latest response of the session a door's session key maps to, if any."""
        return await self._steering.latest_in_session(principal_id, harness_id, key)

    async def door_session_gone(self, principal_id: str, harness_id: str, key: SessionKey) -> bool:
        """Whether the door's key was mapped to a session that has since been deleted (a key
        never mapped is not gone: it is unknown)."""
        return await self._steering.door_session_gone(principal_id, harness_id, key)

    async def rekey_door_session(
        self, principal_id: str, harness_id: str, key: SessionKey, session_id: str
    ) -> None:
        """Make `key` the one key of its door that maps to the session: only the newest key
        continues it (a door whose key changes every turn)."""
        await self._db.write(
            door_sessions.rekey,
            principal_id,
            harness_id,
            key.door,
            key.external_id,
            session_id,
        )

    # -- reading rows ------------------------------------------------------------------------
    async def _row(self, principal_id: str, response_id: str) -> ResponseRow:
        row = await self._db.read(response_store.get_response, principal_id, response_id)
        if row is None:
            raise response_not_found()
        return row

    async def _current(self, row: ResponseRow, *, replay: bool = False) -> dict[str, Any]:
        """From the run in memory, else read (stored events are folded) on a reader."""
        run = self._runs.get(row.id)
        if run is not None and answers_live(run, row, replay):
            return run.log.current()
        return await self._db.read(current_response, self._runs, row, replay)

    def _readable(self, row: ResponseRow) -> bool:
        """Whether the response's content may be read: kept (`store: true`), or still running
        (its stream, a blocking wait). A finished run stays in memory a while; that does not
        make a `store: false` response readable (Tasks §4)."""
        if row.store:
            return True
        run = self._runs.get(row.id)
        return run is not None and not run.log.finished
