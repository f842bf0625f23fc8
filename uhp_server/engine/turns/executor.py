"""One turn: start the base's CLI in the sandbox, translate what it does, stop it on time.

The terminal event is written the moment the outcome is known — a cancel, a spent budget, or
the CLI's own report — so a Stop button answers at once. Winding the process down (a clean
interrupt, then a kill after a grace period: engine/turns/stopping.py) happens afterwards, and the
session stays busy until the process is gone so the next turn never shares the workspace with
a dying one. What a turn runs and the live run itself are engine/turns/run.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from harness_bases import compile_cache
from harness_bases import events as ev
from harness_bases.base import HarnessBase, ImageInput, Invocation, McpServerSpec, TurnSpec
from harness_bases.plugin_folders import place_plugins, stdio_launches
from harness_bases.turns import AgentTurn
from uhp_server.engine.requests import IncompleteReason, TaskStatus
from uhp_server.engine.tasks.attachments import prompt_note
from uhp_server.engine.turns import unkept
from uhp_server.engine.turns.admission import Admission
from uhp_server.engine.turns.files import TurnFiles
from uhp_server.engine.turns.phases import TurnClock, TurnPhase
from uhp_server.engine.turns.questions import (
    NATIVE_QUESTION_TOOLS,
    TEXT_INSTRUCTION,
    asks_in_text,
    is_question_tool,
    park_on_text_question,
    text_question,
)
from uhp_server.engine.turns.run import PARKED_REASON, Outcome, Run, RunPhase, TurnPlan
from uhp_server.engine.turns.stopping import limit_outcome, wind_down
from uhp_server.engine.turns.warm import WarmAgent, WarmAgents, stop_process, stop_revoked
from uhp_server.environments.mount import EnvironmentMount
from uhp_server.environments.turn import (
    environment_instructions,
    version_folder_missing,
    with_environment,
)
from uhp_server.errors import error_body
from uhp_server.gateway.mcp_targets import McpTarget, degraded_notice, mcp_path, probe
from uhp_server.gateway.memory_server import MEMORY_SERVER
from uhp_server.gateway.paths import gateway_path
from uhp_server.gateway.tokens import TurnGrant, UsageTotals
from uhp_server.gateway.user_questions import QUESTION_SERVER
from uhp_server.ops.metrics import Metrics
from uhp_server.sandbox.base import ExtraMount, Sandbox, SandboxedProcess, SessionMounts

log = logging.getLogger("uhp_server.turn")

# A base with no MCP client (mcp_transports empty) and an agent with memories.
NO_MEMORY_TOOLS = (
    "The {label} base has no MCP client: this turn's agent has no memory tools. Its memories "
    "still prime the session, and the turn is still recorded in them."
)
CANCELLED_COLLECT_SECONDS = 0.3  # what a stopped turn's artifact collection may delay it

# How a run's agent asks the user: (the run, the question, its options) -> the answer, or None.
Asker = Callable[[Run, str, tuple[str, ...]], Awaitable[str | None]]


class TurnExecutor:
    def __init__(
        self,
        sandbox: Sandbox,
        tokens: Any,
        tools_dir: Path,
        grace_seconds: float,
        files: TurnFiles | None = None,
        admission: Admission | None = None,
        metrics: Metrics | None = None,
        agent_numbers: Callable[[str], Awaitable[int]] | None = None,
        warm: WarmAgents | None = None,
    ):
        self.sandbox = sandbox
        self.tokens = tokens
        self.tools_dir = tools_dir
        self.grace_seconds = grace_seconds
        self.files = files  # attachments in, artifacts out; None: neither
        self.admission = admission  # None: no limit on concurrent turns
        self._queued = 0  # turns waiting for admission now
        self.metrics = metrics
        # A principal's agent number, for the uid its agents run as (sandbox/agent_user.py);
        # None: the sandbox's default uid for every turn.
        self.agent_numbers = agent_numbers
        # Sessions' processes kept warm between their turns (engine/turns/warm.py); None:
        # every turn starts cold.
        self.warm = warm
        # Told of a session whose CLI compacted its conversation, so its next turn is primed
        # afresh (Memories §9.1: engine/facade/agent_memories.py `compacted`); None: not told.
        self.compacted: Callable[[str], Awaitable[None]] | None = None

    async def execute(self, run: Run, on_terminal: Callable[[Run], None], ask: Asker) -> None:
        """Run the turn; `on_terminal` is called once the terminal event is written, before
        the process is wound down. `ask`: how its agent asks the user (RunRegistry.ask), the
        server's question tool and the CLI's own alike, on a turn whose door takes one."""
        plan = run.plan
        door = self.sandbox.door(run.response_id)
        grant = self._fresh_grant(run, door)
        proc: SandboxedProcess | None = None
        agent_turn: AgentTurn | None = None
        agen: AsyncIterator[ev.AgentEvent] | None = None
        pending: asyncio.Future[ev.AgentEvent] | None = None
        warm: WarmAgent | None = None  # the session's process kept warm, once taken
        outcome = Outcome(TaskStatus.FAILED, "harness_error", "The agent could not be started.")
        before = None  # the workspace as the turn found it, once known
        admitted = False
        clock = TurnClock(plan.base.name, self.metrics)
        if self.metrics is not None:
            self.metrics.turn_started(plan.base.name)
        try:
            await run.record(run.builder.in_progress)
            await self._previous_turn_gone(run)
            admitted = await self._admit(run)
            clock.mark(TurnPhase.ADMITTED)
            if not run.stop.is_set():
                run.enter(RunPhase.RUNNING)
            plan = await self._conversation_before(run)
            warm = self.warm.take(run) if self.warm is not None else None
            if warm is not None and not await self._resumed(warm):
                warm = None  # could not be thawed: stopped, and this turn starts cold
            if warm is not None:  # the process holds its token: the grant goes on with it
                resumed = self._resumed_grant(run, grant, warm)
                if resumed is None:  # its grant lapsed while it idled: it starts cold
                    await stop_process(warm.proc)
                    warm = None
                else:
                    grant = resumed
            mcp = await self._reachable_mcp(run)
            await self._without_memory_tools(run, plan)
            grant.mcp_servers = {target.name: target for target in mcp}
            spec = await self._with_attachments(run, self._spec(plan, grant.token, mcp))
            if plan.ask_user:
                spec = dataclasses.replace(spec, ask_user=functools.partial(ask, run))
            invocation = None  # a warm process read its config when it started
            if warm is None:
                # Writes the plugins and the CLI's config files: disk work, off the event loop.
                invocation = await asyncio.to_thread(_prepare, plan.base, spec, plan.environment)
            clock.mark(TurnPhase.PREPARED)
            before = await self.files.baseline(run) if self.files else None
            agent_number = None
            if self.agent_numbers is not None and self.sandbox.per_principal_users:
                agent_number = await self.agent_numbers(run.principal_id)
            mounts = SessionMounts(
                workspace=plan.workspace,
                home=plan.home,
                tools=self.tools_dir,
                labels={
                    "uhp.session": run.session_id,
                    "uhp.response": run.response_id,
                    "uhp.base": f"{plan.base.name}@{plan.base.cli_version}",
                },
                door=door,
                agent_number=agent_number,
                extra=self._environment_mounts(plan.environment),
            )
            missing = await _missing_version(plan.environment)
            clock.mark(TurnPhase.BASELINE)
            if run.stop.is_set():  # stopped while the turn was being prepared
                outcome = run.stopped_outcome()
            elif missing is not None:
                outcome = Outcome(TaskStatus.FAILED, "environment_unavailable", missing)
            else:
                if warm is not None:
                    proc, agent_turn = warm.proc, plan.base.continue_turn(warm.turn, spec)
                if agent_turn is None:
                    if warm is not None:  # the base could not go on in it after all
                        await stop_revoked(self.tokens, grant.token, warm.proc)
                        warm = None
                        grant = self._fresh_grant(run, door)
                        spec = dataclasses.replace(spec, gateway_token=grant.token)
                    if invocation is None:
                        invocation = await asyncio.to_thread(
                            _prepare, plan.base, spec, plan.environment
                        )
                    proc = await self.sandbox.start(invocation, mounts)
                    agent_turn = plan.base.start_turn(proc, spec)
                clock.mark(TurnPhase.SANDBOX)
                agen = agent_turn.events()
                outcome, pending = await self._consume(run, agen, clock)
                clock.mark(TurnPhase.OUTCOME)
        except unkept.TooMuchToSetAside as refused:  # before its CLI started: nothing to undo
            outcome = Outcome(TaskStatus.FAILED, "harness_error", str(refused))
        except Exception:
            log.exception("turn_error", extra={"response_id": run.response_id})
        finally:
            run.enter(RunPhase.ENDING)
            outcome = await limit_outcome(proc, outcome)
            if self.metrics is not None:
                self.metrics.turn_ended(plan.base.name, outcome.status, clock.since_start())
            # The outcome is known: no model call may follow it, even while the CLI winds
            # down (the grant is kept for its usage), or idles kept warm (suspended, the
            # token still the process's).
            keep = (
                self.warm is not None
                and self.sandbox.keeps_processes_warm
                and agent_turn is not None
                and pending is None
                and self.warm.may_keep(run, outcome, proc)
                and self.tokens.suspend(grant.token, plan.keep_warm_seconds) is not None
            )
            if not keep:
                self.tokens.revoke(grant.token)
            run.grant = None
            # A per-turn model connection (its key) lives no longer than the turn, though the
            # run stays in memory a while for readers.
            run.plan = dataclasses.replace(plan, route=None)
            usage = grant.usage.as_uhp() or _cli_usage(run.cli_usage)
            files, notice, collecting = await self._artifacts(run, before, outcome)
            clock.mark(TurnPhase.COLLECTED)
            recorded = False
            try:
                if keep and self.warm is not None:
                    self.warm.expect(run)  # before its response ends (warm.py)
                await self._finish(run, outcome, usage, files, notice)
                clock.mark(TurnPhase.RECORDED)
                on_terminal(run)
                recorded = True
            finally:  # the process stops even when its end could not be recorded
                try:
                    if keep and recorded and proc is not None and agent_turn is not None:
                        await self._keep_warm(run, proc, agent_turn, agen, grant)
                    else:
                        if keep:
                            self.tokens.revoke(grant.token)
                        await wind_down(
                            proc, agent_turn, agen, pending, outcome, self.grace_seconds
                        )
                finally:
                    if keep and self.warm is not None:
                        self.warm.not_coming(run)  # parked, or not at all: expected no more
                    if warm is not None and proc is None:  # taken, then stopped before it ran
                        await stop_process(warm.proc)
                    if not run.keeps_conversation:  # its process is gone: nothing writes more
                        await self._put_conversation_back(run)
                    if collecting is not None:  # a late collection is part of the turn's work
                        await asyncio.gather(collecting, return_exceptions=True)
                    if admitted and self.admission is not None:
                        self.admission.release(run.response_id)
                    clock.mark(TurnPhase.WOUND_DOWN)
                    run.enter(RunPhase.ENDED)

    def _fresh_grant(self, run: Run, door: str | None) -> TurnGrant:
        """A new gateway grant for the turn, on its own sandbox's door."""
        plan, route = run.plan, run.plan.route
        grant = self.tokens.issue(
            plan.base.backend,
            route.model if route else plan.model,
            plan.timeout_seconds + 300,
            provider=route.provider if route else None,
            door=door,
        )
        grant.asks_user = plan.ask_user
        grant.memory = plan.memory  # the memory tools act as this turn's agent, and no other
        run.grant = grant
        return grant

    def _resumed_grant(self, run: Run, fresh: TurnGrant, warm: WarmAgent) -> TurnGrant | None:
        """The warm process's grant, live again with this turn's limits, in place of the
        one issued for a cold start (then revoked: no sandbox holds it). None: it lapsed."""
        plan, route = run.plan, run.plan.route
        grant = self.tokens.resume(
            warm.grant.token,
            route.model if route else plan.model,
            plan.timeout_seconds + 300,
            provider=route.provider if route else None,
        )
        if grant is None:
            return None
        self.tokens.revoke(fresh.token)
        grant.asks_user = plan.ask_user
        grant.memory = plan.memory
        run.grant = grant
        return grant

    async def _resumed(self, warm: WarmAgent) -> bool:
        """Thaw a warm process taken for its session's next turn (it idled paused); one
        that cannot be thawed is stopped, its token revoked."""
        try:
            await warm.proc.resume()
            return True
        except OSError:
            log.exception("warm_resume_failed")
            await stop_revoked(self.tokens, warm.grant.token, warm.proc)
            return False

    async def _keep_warm(
        self,
        run: Run,
        proc: SandboxedProcess,
        agent_turn: AgentTurn,
        agen: AsyncIterator[ev.AgentEvent] | None,
        grant: TurnGrant,
    ) -> None:
        """Park the finished turn's process for the session's next turn: its event stream is
        closed where it stopped, at the outcome (stdin open, nothing read past it)."""
        assert self.warm is not None
        if agen is not None:
            with contextlib.suppress(BaseException):
                await agen.aclose()  # type: ignore[attr-defined]
        # Paused while it idles: what the agent left running takes no CPU outside admission
        # (no turn slot holds it). A sandbox that cannot pause it does not keep it.
        if not await proc.pause():
            await stop_revoked(self.tokens, grant.token, proc)
            return
        self.warm.park(run, proc, agent_turn, grant)

    def _environment_mounts(self, environment: EnvironmentMount | None) -> tuple[ExtraMount, ...]:
        """The turn's environment version at its mount path, read-only; only that version: no
        other version or environment is reachable from the sandbox (Environments §6)."""
        if environment is None:
            return ()
        return (ExtraMount(environment.host_path, environment.mount),)

    def place_in_line(self, run: Run) -> int | None:
        """A queued run's place in the admission line (1: the next), when known here."""
        if self.admission is None or not run.queued:
            return None
        return self.admission.position(run.response_id)

    def _report_queue(self) -> None:
        if self.metrics is not None:
            self.metrics.set_queued(self._queued)

    async def _admit(self, run: Run) -> bool:
        """Wait (queued) for a slot to run in. False when there is no limit, or when the task
        was cancelled while it waited: it then leaves the line at once."""
        if self.admission is None:
            return False
        run.enter(RunPhase.QUEUED)
        self._queued += 1
        self._report_queue()
        acquiring = asyncio.ensure_future(self.admission.acquire(run.response_id, run.principal_id))
        stopping = asyncio.ensure_future(run.stop.wait())
        try:
            await asyncio.wait({acquiring, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the server is stopping: leave the line, keep no slot
            acquiring.cancel()
            if acquiring.done() and not acquiring.cancelled():
                self.admission.release(run.response_id)
            raise
        finally:
            self._queued -= 1
            self._report_queue()
            stopping.cancel()
        if not acquiring.done():
            acquiring.cancel()
        try:
            await acquiring
        except asyncio.CancelledError:
            return False
        return True

    async def _conversation_before(self, run: Run) -> TurnPlan:
        """A `store: false` task's conversation files are set aside before its turn runs
        (engine/turns/unkept.py; too many of them and the turn is refused before it starts:
        TooMuchToSetAside); a kept turn first puts back any that a `store: false` task
        left aside (parked and never answered, or cut off by a crash), and resumes the CLI
        conversation it started from."""
        plan = run.plan
        home, paths = plan.home, plan.base.conversation_paths
        if not plan.store:
            run.conversation_start = await unkept.off_loop(
                unkept.set_aside, home, paths, plan.native_session_id
            )
        elif unkept.set_aside_pending(home):  # one stat: never behind the pool's queue
            started_from = await unkept.off_loop(unkept.put_back, home, paths)
            run.plan = plan = dataclasses.replace(plan, native_session_id=started_from)
        return plan

    @staticmethod
    async def _put_conversation_back(run: Run) -> None:
        """The CLI's conversation files as the `store: false` task found them."""
        try:
            await unkept.off_loop(unkept.put_back, run.plan.home, run.plan.base.conversation_paths)
        except Exception:
            log.exception("unkept_conversation_left", extra={"response_id": run.response_id})

    async def _previous_turn_gone(self, run: Run) -> None:
        """A session's turns never overlap in its workspace, even while one is winding down."""
        if run.after is not None:
            waits = [
                asyncio.ensure_future(run.after.stopped.wait()),
                asyncio.ensure_future(run.stop.wait()),  # a cancel need not wait for it
            ]
            await asyncio.wait(
                waits, timeout=self.grace_seconds + 5, return_when=asyncio.FIRST_COMPLETED
            )
            for waiting in waits:
                waiting.cancel()
            run.after = None

    async def _with_attachments(self, run: Run, spec: TurnSpec) -> TurnSpec:
        """Place the task's files in the workspace and tell the agent where they are; the
        input images also go to the model as images, on the bases that send them."""
        placed = await self.files.bring_in(run) if self.files else []
        if not placed:
            return spec
        images = tuple(
            ImageInput(
                host_path=run.plan.workspace / p.name,
                path=f"{spec.paths.workspace}/{p.name}",
                media_type=p.media_type,
            )
            for p in placed
            if p.image
        )
        prompt = f"{spec.prompt}\n\n{prompt_note(placed)}".lstrip()
        return dataclasses.replace(spec, prompt=prompt, images=images)

    async def _artifacts(
        self, run: Run, before: Any, outcome: Outcome
    ) -> tuple[list[dict[str, Any]], str | None, asyncio.Future[Any] | None]:
        """What the turn wrote, stored as artifacts: (citations, notice, a collection still
        running). A storage error never loses the turn. A cancel must answer within a second,
        so a slow collection goes on after the terminal event: its files are then listed with
        the session's files rather than cited."""
        if self.files is None or before is None:
            return [], None, None
        collecting = asyncio.ensure_future(self.files.collect(run, before))
        budget = CANCELLED_COLLECT_SECONDS if run.cut_short else None
        try:
            files, notice = await asyncio.wait_for(asyncio.shield(collecting), budget)
        except TimeoutError:
            return [], "The files this turn wrote are listed with the session's files.", collecting
        except Exception:
            log.exception("artifact_collection_failed", extra={"response_id": run.response_id})
            return [], "The files this turn wrote could not be stored as artifacts.", None
        return files, notice, None

    async def _reachable_mcp(self, run: Run) -> tuple[McpTarget, ...]:
        """The MCP servers this turn can use. One that cannot be reached (or that the base
        cannot speak to) never fails the task: the turn runs without it, and says so."""
        targets = run.plan.mcp_servers
        problems = await asyncio.gather(*(self._mcp_problem(run.plan.base, t) for t in targets))
        usable = []
        for target, problem in zip(targets, problems, strict=True):
            if problem is None:
                usable.append(target)
            else:
                notice = ev.Notice(degraded_notice(target.name, problem))
                await run.record(functools.partial(run.builder.apply, notice))
        return tuple(usable)

    @staticmethod
    async def _without_memory_tools(run: Run, plan: TurnPlan) -> None:
        """An agent with memories on a base with no MCP client cannot hold its memory tools
        (§9.1): the turn says so, visibly, and still primes the session and is observed."""
        if plan.memory is not None and not speaks_http_mcp(plan.base):
            notice = ev.Notice(NO_MEMORY_TOOLS.format(label=plan.base.label))
            await run.record(functools.partial(run.builder.apply, notice))

    @staticmethod
    async def _mcp_problem(base: HarnessBase, target: McpTarget) -> str | None:
        if target.transport not in base.mcp_transports:
            return f"uses a transport ({target.transport}) the {base.label} base cannot speak"
        return await probe(target)

    def _spec(self, plan: TurnPlan, token: str, mcp: tuple[McpTarget, ...] = ()) -> TurnSpec:
        backend = plan.base.backend
        gateway_url = self.sandbox.gateway_url(backend)
        # The MCP proxy lives on the same gateway origin the sandbox reaches models through.
        origin = gateway_url.removesuffix(gateway_path(backend))
        servers = tuple(
            McpServerSpec(t.name, origin + mcp_path(t.name), token, t.transport) for t in mcp
        )
        system_prompt = plan.system_prompt
        asks_over_mcp = "http" in plan.base.mcp_transports and not plan.base.asks_natively
        if plan.ask_user and asks_over_mcp:
            asking = McpServerSpec(QUESTION_SERVER, origin + mcp_path(QUESTION_SERVER), token)
            servers = (*servers, asking)
        elif asks_in_text(plan):  # neither MCP nor its own tool: the agent asks in its text
            system_prompt = "\n\n".join(p for p in (system_prompt, TEXT_INSTRUCTION) if p)
        if plan.memory is not None and speaks_http_mcp(plan.base):  # its memory tools (§9.1)
            memory = McpServerSpec(MEMORY_SERVER, origin + mcp_path(MEMORY_SERVER), token)
            servers = (*servers, memory)
        if plan.environment is not None:
            note = environment_instructions(plan.environment, self.sandbox.paths.workspace)
            system_prompt = "\n\n".join(p for p in (system_prompt, note) if p)
        return TurnSpec(
            prompt=plan.prompt,
            model=plan.model,
            gateway_url=gateway_url,
            gateway_token=token,
            host_workspace=plan.workspace,
            host_home=plan.home,
            host_tools=self.tools_dir,
            paths=self.sandbox.paths,
            native_session_id=plan.native_session_id,
            system_prompt=system_prompt,
            disabled_tools=plan.disabled_tools,
            max_output_tokens=plan.max_output_tokens,
            max_step=plan.max_step,
            skills=plan.skills,
            mcp_servers=servers,
            plugins=plan.plugins,
            stdio_servers=stdio_launches(plan.plugins, self.sandbox.paths),
        )

    async def _consume(
        self, run: Run, agen: AsyncIterator[ev.AgentEvent], clock: TurnClock
    ) -> tuple[Outcome, asyncio.Future[ev.AgentEvent] | None]:
        """Feed the CLI's events to the log until an outcome; returns it and any read still
        in flight (left running so the wind-down can keep draining stdout). `clock`: the
        turn's, marked at the first event (and the time-to-first-event metric)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + run.plan.timeout_seconds
        stop_wait = asyncio.ensure_future(run.stop.wait())
        first = True
        try:
            while True:
                pending = asyncio.ensure_future(anext(agen))
                done, _ = await asyncio.wait(
                    {pending, stop_wait},
                    timeout=max(0.0, deadline - loop.time()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if pending not in done:
                    if stop_wait in done:  # cancelled, timed out by a caller, parked, let go
                        return run.stopped_outcome(), pending
                    budget = run.plan.timeout_seconds
                    details = {
                        "reason": IncompleteReason.TIMEOUT_SECONDS,
                        "timeout_seconds": budget,
                    }
                    return Outcome(TaskStatus.INCOMPLETE, incomplete_details=details), pending
                try:
                    event = pending.result()
                except StopAsyncIteration:
                    exited = "The agent exited without reporting a result."
                    return Outcome(TaskStatus.FAILED, "harness_error", exited), None
                if first:
                    clock.mark(TurnPhase.FIRST_EVENT)
                    if self.metrics is not None:
                        self.metrics.turn_first_event(run.plan.base.name, clock.since_start())
                first = False
                outcome = await self._handle(run, event)
                if outcome is not None:
                    return outcome, None
        finally:
            stop_wait.cancel()

    async def _handle(self, run: Run, event: ev.AgentEvent) -> Outcome | None:
        if run.log.ending:  # a cancel wrote the terminal event itself: the outcome is decided
            return Outcome(TaskStatus.CANCELLED)
        match event:
            case ev.NativeSession(id=native_id):
                run.native_session_id = native_id
            case ev.Usage():
                run.cli_usage = event
            case ev.ConversationCompacted():
                await self._compacted(run)
            case ev.TurnFinished():
                if asks_in_text(run.plan) and (question := text_question(run.builder.response)):
                    pending = await park_on_text_question(run, question)
                    parked = {"reason": PARKED_REASON, "pending_call_ids": pending}
                    return Outcome(TaskStatus.INCOMPLETE, incomplete_details=parked)
                return Outcome(TaskStatus.COMPLETED)
            case ev.TurnFailed(message=message, code=code):
                refusal = run.grant.provider_refusal if run.grant is not None else None
                if code == "harness_error" and refusal is not None:
                    # The provider refused the last model call: that is why, whatever the CLI
                    # could tell of it (a generic ACP agent's error is its own).
                    return Outcome(TaskStatus.FAILED, "provider_error", refusal)
                return Outcome(TaskStatus.FAILED, code, message)
            case ev.StepBudgetReached():
                details = {"reason": IncompleteReason.MAX_STEP, "max_step": run.plan.max_step}
                return Outcome(TaskStatus.INCOMPLETE, incomplete_details=details)
            case ev.ToolCallStarted(name=name, call=call) if is_question_tool(name) or (
                run.plan.ask_user and name in NATIVE_QUESTION_TOOLS
            ):
                run.hidden_calls.add(call)  # the engine records the question itself
            case ev.ToolCallFinished(call=call) if call in run.hidden_calls:
                pass
            case ev.ToolCallStarted():
                budget = run.plan.max_step
                if budget is not None and run.builder.tool_calls >= budget:
                    details = {"reason": IncompleteReason.MAX_STEP, "max_step": budget}
                    return Outcome(TaskStatus.INCOMPLETE, incomplete_details=details)
                await run.log.append(run.builder.apply(event))
            case _:
                await run.log.append(run.builder.apply(event))
        return None

    async def _compacted(self, run: Run) -> None:
        """The CLI compacted its conversation: the session's next turn is primed afresh.
        Recorded now, while the session is still held by this turn, so its next turn (which
        waits for the release) finds it. Never the turn's failure. A `store: false` turn's
        conversation goes back to what it was once it ends (engine/turns/unkept.py), its
        compaction with it: nothing to record."""
        if run.compacted or run.plan.memory is None or self.compacted is None:
            return
        if not run.plan.store:
            return
        run.compacted = True
        try:
            await self.compacted(run.session_id)
        except Exception:
            log.exception("compaction_unrecorded", extra={"response_id": run.response_id})

    async def _finish(
        self,
        run: Run,
        outcome: Outcome,
        usage: dict[str, Any] | None,
        files: list[dict[str, Any]] | None = None,
        notice: str | None = None,
    ) -> None:
        if run.log.ending:
            return  # a cancel already wrote the terminal event
        error = None
        if outcome.status is TaskStatus.FAILED:
            error = error_body(200, outcome.code or "harness_error", outcome.message or "")["error"]
            error["type"] = "harness_error"
            error["detail"] = None
        await run.log.append(
            run.builder.finish(
                outcome.status,
                error=error,
                incomplete_details=outcome.incomplete_details,
                usage=usage,
                files=files,
                notice=notice,
            )
        )


def speaks_http_mcp(base: HarnessBase) -> bool:
    """Whether the base's CLI reaches the gateway's MCP servers (the server's own too)."""
    return "http" in base.mcp_transports


def _prepare(
    base: HarnessBase, spec: TurnSpec, environment: EnvironmentMount | None = None
) -> Invocation:
    """The turn's enabled plugins placed in the session (the same for every base), then the
    CLI's own files; on an environment, its dependencies first in the invocation's
    environment, which the base has just built from nothing (environments/turn.py)."""
    place_plugins(spec)
    invocation = base.prepare(spec)
    # A node CLI reads the compile cache `bases install` made of it (compile_cache.py).
    invocation.env.update(compile_cache.turn_env(spec.host_tools, spec.paths.tools, base))
    return with_environment(invocation, environment)


async def _missing_version(environment: EnvironmentMount | None) -> str | None:
    """Why the turn's version cannot be mounted: its folder is gone (removed behind the
    server's back; retention keeps every version a session reads). None: it can."""
    if environment is None:
        return None
    return await asyncio.to_thread(version_folder_missing, environment)


def _cli_usage(usage: ev.Usage | None) -> dict[str, Any] | None:
    """The CLI's own report, in the same shape as the gateway's count."""
    if usage is None:
        return None
    return UsageTotals(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cached_input_tokens,
        seen=True,
    ).as_uhp()
