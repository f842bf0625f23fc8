"""Accepting a task: resolve harness and session (engine/tasks/resolution.py), model and budgets,
then start the turn.

Everything that decides the task (idempotency record, session claim, response row) is one
transaction (engine/tasks/acceptance.py), and the database decides between racing requests (the
key's primary key, the session claim's conditional UPDATE): two can never both claim a
session or an idempotency key.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_bases.base import HarnessBase
from storage import acceptance as accepting
from storage import files as file_store
from storage import responses as response_store
from storage.acceptance import HeldSession
from storage.blobs import BlobStore
from storage.db import Database, Order, SessionRelease
from storage.tables import HarnessRow, SessionRow
from storage.unit import Tx
from uhp_server.catalog import ModelCatalog, ModelRoute
from uhp_server.engine.facade.agent_memories import AgentMemories, TurnMemory
from uhp_server.engine.requests import EngineTask
from uhp_server.engine.tasks import acceptance
from uhp_server.engine.tasks.acceptance import Acceptance
from uhp_server.engine.tasks.attachments import write_inline_blobs
from uhp_server.engine.tasks.environment import task_environment
from uhp_server.engine.tasks.inputs import Attachment, NormalizedInput, normalize_input
from uhp_server.engine.tasks.opening import opening_system_text, with_opening
from uhp_server.engine.tasks.resolution import TaskResolution
from uhp_server.engine.turns.builder import ResponseBuilder
from uhp_server.engine.turns.eventlog import EventLog, numbered
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.engine.turns.run import Run, TurnPlan
from uhp_server.engine.turns.warm import harness_revision
from uhp_server.environments.layout import EnvironmentLayout
from uhp_server.environments.mount import EnvironmentMount
from uhp_server.errors import VENDOR, ApiError
from uhp_server.gateway.connection import connection_provider
from uhp_server.gateway.mcp_targets import McpTarget
from uhp_server.gateway.providers import provider_secrets
from uhp_server.gateway.scrubbing import prepare
from uhp_server.harnesses.base_config import bound, resolve_secrets
from uhp_server.harnesses.builtin_skills import builtin_skills
from uhp_server.harnesses.config import HarnessConfig
from uhp_server.harnesses.runtime import TurnParts, builtin_turn_parts, turn_parts
from uhp_server.ids import new_id, new_time_ordered_id
from uhp_server.settings import Settings


@dataclass(frozen=True)
class Accepted:
    """A submitted task: a new run (`fresh`: all of it in memory, read without storage), or
    the response an idempotent repeat refers to, read back by its id like any other."""

    response_id: str
    _run: Run | None = field(default=None, repr=False)

    @classmethod
    def repeat(cls, response_id: str) -> Accepted:
        """The response a repeat of an earlier request refers to."""
        return cls(response_id)

    @property
    def fresh(self) -> bool:
        return self._run is not None

    def events(self) -> AsyncIterator[dict[str, Any]]:
        """The new task's events from its first, live until the terminal one."""
        assert self._run is not None, "a repeat is read back by its id"
        return self._run.log.follow()

    async def response(self, *, wait: bool) -> dict[str, Any]:
        """The new task's response, once it has ended when `wait`, else as it stands."""
        assert self._run is not None, "a repeat is read back by its id"
        if wait:
            await self._run.log.wait_finished()
        return self._run.log.current()


class TaskIntake:
    """Accepts tasks from every door: the one way a task starts."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        bases: dict[str, HarnessBase],
        catalog: ModelCatalog,
        runs: RunRegistry,
        blobs: BlobStore | None = None,
        memories: AgentMemories | None = None,
    ) -> None:
        self.settings = settings
        self.memories = memories  # the harness's agent and its memories (Memories §9)
        self.db = db
        self.bases = bases
        self.catalog = catalog
        self.runs = runs
        self.blobs = blobs or BlobStore(settings.blobs_dir)
        self.resolution = TaskResolution(settings, db, bases)
        self.environments = EnvironmentLayout(settings.environments_dir)
        self._starting: dict[str, asyncio.Future[None]] = {}  # being accepted, by response id
        builtin_skills()  # read now, at start-up: a turn takes them on the event loop

    # -- idempotency ---------------------------------------------------------------------
    async def _idempotent_winner(self, a: Acceptance) -> str | None:
        """The response an earlier request with this Idempotency-Key made (None: none)."""
        if not (a.idempotency_key and a.fingerprint):
            return None
        return await self.db.write(
            self._idempotent, a.task.principal_id, a.idempotency_key, a.fingerprint, order=Order.ANY
        )

    def _idempotent(self, tx: Tx, principal_id: str, key: str, print_: str) -> str | None:
        row = response_store.get_idempotency(tx, principal_id, key)
        if row is None:
            return None
        if time.time() - row.created_at > self.settings.idempotency_retention_hours * 3600:
            response_store.forget_idempotency(tx, principal_id, key)
            return None
        if row.fingerprint != print_:
            raise ApiError(
                409,
                VENDOR + "idempotency_key_reused",
                "This Idempotency-Key was already used with a different request body.",
                param="Idempotency-Key",
            )
        return row.response_id

    async def idempotent_response(self, principal_id: str, key: str, print_: str) -> str | None:
        """The response a request with this idempotency key (and fingerprint) created, if
        it is still remembered: a door finds its task again without starting one."""
        return await self.db.write(self._idempotent, principal_id, key, print_)

    # -- acceptance ----------------------------------------------------------------------
    async def start(
        self,
        task: EngineTask,
        *,
        idempotency_key: str | None = None,
        fingerprint: str | None = None,
        base_url: str = "",
    ) -> Accepted:
        """Accept a task from any door. `base_url` is the origin the client used: artifact
        links use it. `fingerprint` (with `idempotency_key`) identifies the request for an
        idempotent repeat.

        `task.model_connection`: run this turn's model calls against it instead of the
        configured providers (gateway/connection.py).

        Storage work runs off the event loop: reads on the database's readers, and everything
        that decides the task — the idempotency record, the session claim, the input files and
        the response row — as one transaction, whose primary keys and conditional UPDATE keep
        two racing requests from both claiming a session or an idempotency key."""
        principal_id = task.principal_id
        model_connection = task.model_connection
        normalized = await self._normalized(task)
        self._check_timeout(task.timeout_seconds)
        resolved = await self.resolution.resolve(task)
        harness, session, previous = resolved.harness, resolved.session, resolved.previous
        base = self.bases.get(harness.base)
        if base is None:
            raise ApiError(
                503,
                "harness_unavailable",
                f"The '{harness.base}' base is not enabled on this server.",
            )
        config = HarnessConfig.from_stored(harness.config)
        base, base_secrets = await self._bound(base, principal_id, config)
        # Refused here, before anything is stored or started, when it is not there or not built.
        environment = await self._environment(task, config, session)
        memory = await self._memory(task, harness.id, session)  # refused here too
        if model_connection is not None:
            allow = self.settings.model_connection_allow_private_hosts
            provider = connection_provider(model_connection, allow)
            route = ModelRoute(model_connection.model, provider, model_connection.model)
            model_meta: dict[str, Any] = {}
        else:
            route, model_meta = await self.catalog.resolve(base, config.default_model, task.model)
        model = route.id
        max_step, timeout = self._budgets(task, config)
        inline: list[Attachment] = []
        if any(attachment.data is not None for attachment in normalized.attachments):
            inline = await asyncio.to_thread(write_inline_blobs, self.blobs, normalized.attachments)
        parts = await self._turn_parts(principal_id, config)
        new_session_id = None
        if session is None:
            new_session_id = new_time_ordered_id("session")
            await asyncio.to_thread(self._make_session_dirs, new_session_id)
        response_id, now = new_id("response"), int(time.time())
        session_id = session.id if session is not None else new_session_id
        assert session_id is not None
        builder = ResponseBuilder(
            self._response_object(response_id, task, harness, session_id, previous, model, now)
        )
        if environment is not None:  # the environment the task reads, beside its session
            builder.response["metadata"].update(
                environment=environment.environment_id,
                environment_version=str(environment.version),
            )
        builder.response["metadata"].update(model_meta)
        builder.response["metadata"].update(_memory_metadata(memory))
        builder.response["metadata"].update(self._ignored(task, base))
        first_event = numbered(builder.created()[0], 0)
        secrets = (
            *_turn_secrets(route, parts.mcp_servers, self.catalog.upstreams.secrets),
            base_secrets,
        )
        await asyncio.to_thread(prepare, *secrets)  # compiled off the loop, found by all
        self._starting[response_id] = asyncio.get_running_loop().create_future()
        try:
            accepted = await self._accept(
                Acceptance(
                    task,
                    idempotency_key,
                    fingerprint,
                    harness,
                    session,
                    new_session_id,
                    previous,
                    response_id,
                    model,
                    now,
                    normalized,
                    inline,
                    first_event,
                    self.runs.replica_id,
                    door_bound_to=resolved.door_bound_to,
                    environment=environment,
                ),
            )
            if isinstance(accepted, str):  # an idempotent repeat: the response it refers to
                return Accepted.repeat(accepted)
            held = accepted
            plan = TurnPlan(
                base=base,
                prompt=self._prompt(task, normalized, opening=held.id == new_session_id),
                model=model,
                route=route,
                system_prompt=self._system_prompt(config, task, normalized, memory),
                disabled_tools=tuple(config.disabled_tools),
                max_step=max_step,
                timeout_seconds=timeout,
                max_output_tokens=task.max_output_tokens,
                native_session_id=held.native_session_id,
                workspace=self._session_dir(held.id) / "workspace",
                home=self._session_dir(held.id) / "home",
                attachments=tuple(normalized.attachments),
                skills=parts.skills,
                mcp_servers=parts.mcp_servers,
                plugins=parts.plugins,
                ask_user=task.questions.offers_tool,
                store=task.store,
                environment=environment,
                memory=memory,
                keep_warm_seconds=config.keep_warm_seconds,
                harness_revision=harness_revision(harness.id, harness.config),
            )
            # The first event is committed with the response: the log goes on from it.
            log = EventLog(self.db, response_id, persist=task.store, committed=[first_event])
            log.guard(*secrets)
            run = Run(
                response_id=response_id,
                principal_id=task.principal_id,
                session_id=held.id,
                plan=plan,
                questions=task.questions,
                log=log,
                builder=builder,
            )
            log.release_on_end = lambda: SessionRelease(run.session_id, run.native_id_to_keep())
            run.container_id = held.container_id
            run.public_base_url = self.settings.public_base_url or base_url
            # Registered before the next await, so a racing request finds the run.
            self.runs.start(run)
            if memory is not None and memory.starts_session:  # its later turns: the same block
                await self.memories_started(held.id, memory)
            elif memory is not None and memory.reprimed:  # and the turns after a compaction
                await self.memories_reprimed(held.id, memory)
        finally:
            self._starting.pop(response_id).set_result(None)
        return Accepted(response_id, run)

    async def started(self, response_id: str) -> None:
        """Wait while a task with this id is being accepted (an idempotent repeat can find
        its record a moment before its run is registered)."""
        starting = self._starting.get(response_id)
        if starting is not None:
            await asyncio.shield(starting)

    # A thread hop costs a task more than most of its reads: the steps below take one only
    # when the request has something to read or to write.
    async def _normalized(self, task: EngineTask) -> NormalizedInput:
        if isinstance(task.input, str):  # a prompt: no file to look up, nothing to decode
            return normalize_input(task.input)
        principal_id = task.principal_id

        def normalized(tx: Tx, content: Any) -> NormalizedInput:
            look_up = lambda file_id: file_store.get_file(tx, principal_id, file_id)  # noqa: E731
            return normalize_input(content, look_up, self.settings.max_file_bytes)

        return await self.db.read(normalized, task.input)

    async def _environment(
        self, task: EngineTask, config: HarnessConfig, session: SessionRow | None
    ) -> EnvironmentMount | None:
        """The environment version the task reads (engine/tasks/environment.py); a read only
        when the task, its harness or its session names one."""
        if session is not None:  # its own, fixed when it started
            named = task.environment or session.environment_id
        else:
            named = task.environment or config.environment
        if not named:
            return None
        return await self.db.read(
            task_environment,
            self.environments,
            task.principal_id,
            task.environment,
            config.environment,
            session,
        )

    async def _memory(
        self, task: EngineTask, harness_id: str, session: SessionRow | None
    ) -> TurnMemory | None:
        if self.memories is None:
            return None
        session_id = session.id if session is not None else None
        return await self.memories.for_task(harness_id, session_id, task.memory)

    async def memories_started(self, session_id: str, memory: TurnMemory) -> None:
        assert self.memories is not None
        await self.memories.started(session_id, memory)

    async def memories_reprimed(self, session_id: str, memory: TurnMemory) -> None:
        assert self.memories is not None
        await self.memories.reprimed(session_id, memory)

    async def _bound(
        self, base: HarnessBase, principal_id: str, config: HarnessConfig
    ) -> tuple[HarnessBase, tuple[str, ...]]:
        """The base as the harness configured it (harnesses/base_config.py), its secrets
        resolved, and those secrets (never in the turn's events); 422 when it cannot run."""
        if config.base_config is None:
            return bound(base, None), ()
        resolved, found = await self.db.read(resolve_secrets, principal_id, config.base_config)
        return bound(base, resolved), tuple(found)

    async def _turn_parts(self, principal_id: str, config: HarnessConfig) -> TurnParts:
        if not config.has_own_parts:  # built-in skills only: nothing to read
            return builtin_turn_parts()
        allow_private = self.settings.mcp_allow_private_hosts
        return await self.db.read(turn_parts, principal_id, config, allow_private)

    async def _accept(self, a: Acceptance) -> str | HeldSession:
        """One transaction (engine/tasks/acceptance.py). Returns the claimed session, or the id of
        the response an idempotent repeat refers to."""
        winner = await self._idempotent_winner(a)
        if winner:
            return winner
        lost_to: tuple[type[Exception], ...] = (accepting.Busy, *self.db.dialect.integrity_error)
        try:
            return await self.db.write(accepting.accept, acceptance.rows_of(a), order=Order.ANY)
        except lost_to as lost:
            # Another request with this key may have won since the look-up above: its record
            # refused ours, or its claim of the session came first.
            winner = await self._idempotent_winner(a)
            if winner is not None:
                return winner
            if isinstance(lost, accepting.Busy):
                raise acceptance.session_busy() from None
            raise

    def _budgets(self, task: EngineTask, config: HarnessConfig) -> tuple[int | None, int]:
        max_step = task.max_step
        if max_step is None:
            max_step = config.max_step
        limit = self.settings.max_timeout_seconds
        timeout = task.timeout_seconds or config.timeout_seconds
        return max_step, min(int(timeout or self.settings.default_timeout_seconds), limit)

    def _check_timeout(self, timeout: int | None) -> None:
        limit = self.settings.max_timeout_seconds
        if timeout is not None and timeout > limit:
            raise ApiError(
                400,
                "invalid_input",
                f"timeout_seconds may be at most {limit}.",
                param="timeout_seconds",
                detail={"max_timeout_seconds": limit},
            )

    def _make_session_dirs(self, session_id: str) -> None:
        for sub in ("workspace", "home"):
            (self._session_dir(session_id) / sub).mkdir(parents=True, exist_ok=True)

    def _session_dir(self, session_id: str) -> Path:
        return self.settings.sessions_dir / session_id

    @staticmethod
    def _system_prompt(
        config: HarnessConfig,
        task: EngineTask,
        normalized: NormalizedInput,
        memory: TurnMemory | None = None,
    ) -> str:
        parts = [config.system_prompt, opening_system_text(task.opening)]
        parts.extend(normalized.instructions)
        parts.append(task.instructions or "")
        # The session's priming block, the same on every turn of it until its CLI compacts
        # the conversation (Memories §9.1).
        parts.append(memory.primer if memory is not None else "")
        return "\n\n".join(p for p in parts if p.strip())

    @staticmethod
    def _prompt(task: EngineTask, normalized: NormalizedInput, *, opening: bool) -> str:
        """The turn's prompt; a new session's opening conversation comes before it."""
        return with_opening(normalized.prompt, task.opening) if opening else normalized.prompt

    @staticmethod
    def _ignored(task: EngineTask, base: HarnessBase) -> dict[str, Any]:
        ignored = list(task.ignored_fields)
        if "max_output_tokens" in ignored and base.honours_max_output_tokens:
            ignored.remove("max_output_tokens")
        return {"ignored_fields": ignored} if ignored else {}

    @staticmethod
    def _response_object(
        response_id: str,
        task: EngineTask,
        harness: HarnessRow,
        session_id: str,
        previous_id: str | None,
        model: str,
        now: int,
    ) -> dict[str, Any]:
        metadata = dict(task.metadata)
        metadata.update(session_id=session_id, harness_id=harness.id)
        return {
            "id": response_id,
            "object": "response",
            "created_at": now,
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "previous_response_id": previous_id,
            "model": model,
            "output": [],
            "store": task.store,
            "usage": None,
            "metadata": metadata,
            # Fields of the borrowed Responses shape that OpenAI-style clients read.
            "instructions": task.instructions,
            "background": task.background,
            "max_output_tokens": task.max_output_tokens,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
        }


def _memory_metadata(memory: TurnMemory | None) -> dict[str, str]:
    """The session's default memory, and on a turn that placed the priming block (its
    session's first, the first after a compaction) what it placed per memory in tokens
    (Memories §9.1): metadata values are strings, so a JSON one."""
    if memory is None:
        return {}
    said: dict[str, str] = {}
    if memory.default_memory_id:
        said["memory"] = memory.default_memory_id
    if memory.places_block and memory.primed:
        said["memory_priming_tokens"] = json.dumps(memory.primed, separators=(",", ":"))
    return said


def _turn_secrets(
    route: ModelRoute, mcp_servers: tuple[McpTarget, ...], operator: tuple[str, ...]
) -> tuple[tuple[str, ...], ...]:
    """What the turn's events must never hold, in the sets the gateway and the log compile:
    the operator's provider keys, the turn's provider's key and header values (a model
    connection's run token), its MCP servers' stored credentials."""
    mcp = tuple(secret for target in mcp_servers for secret in target.secrets)
    return operator, provider_secrets(route.provider), mcp
