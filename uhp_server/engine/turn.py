"""One turn: start the base's CLI in the sandbox, translate what it does, stop it on time.

The terminal event is written the moment the outcome is known — a cancel, a spent budget, or
the CLI's own report — so a Stop button answers at once. Winding the process down (a clean
interrupt, then a kill after a grace period) happens afterwards, and the session stays busy
until the process is gone so the next turn never shares the workspace with a dying one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.base import HarnessBase, TurnSpec
from uhp_server.engine.builder import ResponseBuilder
from uhp_server.engine.eventlog import EventLog
from uhp_server.errors import error_body
from uhp_server.sandbox.base import Sandbox, SandboxedProcess, SessionMounts

log = logging.getLogger("uhp_server.turn")


@dataclass(frozen=True)
class TurnPlan:
    """What a turn runs, decided when the task was accepted."""

    base: HarnessBase
    prompt: str
    model: str
    system_prompt: str
    disabled_tools: tuple[str, ...]
    max_step: int | None
    timeout_seconds: int
    max_output_tokens: int | None
    native_session_id: str | None
    workspace: Path
    home: Path


@dataclass
class Outcome:
    status: str  # completed | failed | incomplete | cancelled
    code: str | None = None
    message: str | None = None
    incomplete_details: dict[str, Any] | None = None


@dataclass
class Run:
    """A live task: its log, its builder, and the switch that stops it."""

    response_id: str
    principal_id: str
    session_id: str
    plan: TurnPlan
    log: EventLog
    builder: ResponseBuilder
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    native_session_id: str | None = None
    cli_usage: ev.Usage | None = None
    # The previous turn of this session, still winding down: this turn starts after it.
    after: Run | None = None
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # its process is gone
    task: asyncio.Task[None] | None = None


class TurnExecutor:
    def __init__(self, sandbox: Sandbox, tokens: Any, tools_dir: Path, grace_seconds: float):
        self.sandbox = sandbox
        self.tokens = tokens
        self.tools_dir = tools_dir
        self.grace_seconds = grace_seconds

    async def execute(self, run: Run, on_terminal: Callable[[Run], None]) -> None:
        """Run the turn; `on_terminal` is called once the terminal event is written, before
        the process is wound down."""
        plan = run.plan
        grant = self.tokens.issue(plan.base.backend, plan.model, plan.timeout_seconds + 300)
        proc: SandboxedProcess | None = None
        agen: AsyncIterator[ev.AgentEvent] | None = None
        pending: asyncio.Future[ev.AgentEvent] | None = None
        outcome = Outcome("failed", "harness_error", "The agent could not be started.")
        try:
            await run.log.append(run.builder.in_progress())
            await self._previous_turn_gone(run)
            spec = self._spec(plan, grant.token)
            invocation = plan.base.prepare(spec)
            mounts = SessionMounts(workspace=plan.workspace, home=plan.home, tools=self.tools_dir)
            proc = await self.sandbox.start(invocation, mounts)
            agen = plan.base.drive(proc, spec)
            outcome, pending = await self._consume(run, agen)
        except Exception:
            log.exception("turn_error", extra={"response_id": run.response_id})
        finally:
            usage = grant.usage.as_uhp() or _cli_usage(run.cli_usage)
            await self._finish(run, outcome, usage)
            on_terminal(run)
            try:
                await self._wind_down(run, proc, agen, pending, outcome)
            finally:
                self.tokens.revoke(grant.token)
                run.stopped.set()

    async def _previous_turn_gone(self, run: Run) -> None:
        """A session's turns never overlap in its workspace, even while one is winding down."""
        if run.after is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.after.stopped.wait(), self.grace_seconds + 5)
            run.after = None

    def _spec(self, plan: TurnPlan, token: str) -> TurnSpec:
        return TurnSpec(
            prompt=plan.prompt,
            model=plan.model,
            gateway_url=self.sandbox.gateway_url(plan.base.backend),
            gateway_token=token,
            host_workspace=plan.workspace,
            host_home=plan.home,
            host_tools=self.tools_dir,
            paths=self.sandbox.paths,
            native_session_id=plan.native_session_id,
            system_prompt=plan.system_prompt,
            disabled_tools=plan.disabled_tools,
            max_output_tokens=plan.max_output_tokens,
            max_step=plan.max_step,
        )

    async def _consume(
        self, run: Run, agen: AsyncIterator[ev.AgentEvent]
    ) -> tuple[Outcome, asyncio.Future[ev.AgentEvent] | None]:
        """Feed the CLI's events to the log until an outcome; returns it and any read still
        in flight (left running so the wind-down can keep draining stdout)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + run.plan.timeout_seconds
        stop_wait = asyncio.ensure_future(run.stop.wait())
        try:
            while True:
                pending = asyncio.ensure_future(anext(agen))
                done, _ = await asyncio.wait(
                    {pending, stop_wait},
                    timeout=max(0.0, deadline - loop.time()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if pending not in done:
                    if stop_wait in done:
                        return Outcome("cancelled"), pending
                    budget = run.plan.timeout_seconds
                    details = {"reason": "timeout_seconds", "timeout_seconds": budget}
                    return Outcome("incomplete", incomplete_details=details), pending
                try:
                    event = pending.result()
                except StopAsyncIteration:
                    return Outcome(
                        "failed", "harness_error", "The agent exited without reporting a result."
                    ), None
                outcome = await self._handle(run, event)
                if outcome is not None:
                    return outcome, None
        finally:
            stop_wait.cancel()

    async def _handle(self, run: Run, event: ev.AgentEvent) -> Outcome | None:
        match event:
            case ev.NativeSession(id=native_id):
                run.native_session_id = native_id
            case ev.Usage():
                run.cli_usage = event
            case ev.TurnFinished():
                return Outcome("completed")
            case ev.TurnFailed(message=message, code=code):
                return Outcome("failed", code, message)
            case ev.StepBudgetReached():
                details = {"reason": "max_step", "max_step": run.plan.max_step}
                return Outcome("incomplete", incomplete_details=details)
            case ev.ToolCallStarted():
                budget = run.plan.max_step
                if budget is not None and run.builder.tool_calls >= budget:
                    details = {"reason": "max_step", "max_step": budget}
                    return Outcome("incomplete", incomplete_details=details)
                await run.log.append(run.builder.apply(event))
            case _:
                await run.log.append(run.builder.apply(event))
        return None

    async def _finish(self, run: Run, outcome: Outcome, usage: dict[str, Any] | None) -> None:
        error = None
        if outcome.status == "failed":
            error = error_body(200, outcome.code or "harness_error", outcome.message or "")["error"]
            error["type"] = "harness_error"
            error["detail"] = None
        await run.log.append(
            run.builder.finish(
                outcome.status,
                error=error,
                incomplete_details=outcome.incomplete_details,
                usage=usage,
            )
        )

    async def _wind_down(
        self,
        run: Run,
        proc: SandboxedProcess | None,
        agen: AsyncIterator[ev.AgentEvent] | None,
        pending: asyncio.Future[ev.AgentEvent] | None,
        outcome: Outcome,
    ) -> None:
        """Stop the CLI: a clean interrupt when the turn was cut short, then a kill."""
        if proc is None:
            return
        try:
            if outcome.status in ("cancelled", "incomplete"):
                with contextlib.suppress(Exception):
                    await run.plan.base.interrupt(proc)
            else:
                # Closing stdin lets the CLI flush its transcript and exit on its own.
                with contextlib.suppress(Exception):
                    await proc.close_stdin()
            await self._drain(agen, pending, self.grace_seconds)
        finally:
            await proc.kill()
            if agen is not None:
                with contextlib.suppress(BaseException):
                    await agen.aclose()  # type: ignore[attr-defined]

    @staticmethod
    async def _drain(
        agen: AsyncIterator[ev.AgentEvent] | None,
        pending: asyncio.Future[ev.AgentEvent] | None,
        seconds: float,
    ) -> None:
        """Keep reading (and discarding) the CLI's output so it can finish its interrupt."""
        if agen is None:
            return
        deadline = asyncio.get_running_loop().time() + seconds
        try:
            while True:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                pending = pending or asyncio.ensure_future(anext(agen))
                await asyncio.wait_for(pending, remaining)
                pending = None
        except (StopAsyncIteration, TimeoutError, Exception):
            pass
        finally:
            if pending is not None:
                pending.cancel()


def _cli_usage(usage: ev.Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    result = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.cached_input_tokens:
        result["cache_read_tokens"] = usage.cached_input_tokens
    return result
