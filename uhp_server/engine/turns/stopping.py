"""The end of a turn's process: how a cut-short or finished CLI is stopped, and whether its
sandbox's limits decided the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from harness_bases import events as ev
from harness_bases.turns import AgentTurn
from uhp_server.engine.requests import TaskStatus
from uhp_server.engine.turns.run import Outcome
from uhp_server.sandbox.base import SandboxedProcess

log = logging.getLogger("uhp_server.turn")

# Turns stopped before their CLI ended them: the CLI is interrupted first, cleanly.
CUT_SHORT = frozenset({TaskStatus.CANCELLED, TaskStatus.INCOMPLETE})


async def limit_outcome(proc: SandboxedProcess | None, outcome: Outcome) -> Outcome:
    """A turn whose sandbox hit a resource limit failed, whatever the CLI made of it (it
    may have been killed mid-sentence, or carried on after its command was)."""
    if proc is None or outcome.status is TaskStatus.CANCELLED:
        return outcome
    try:
        reason = await proc.limit_exceeded()
    except Exception:
        log.exception("limit_check_failed")
        return outcome
    return outcome if reason is None else Outcome(TaskStatus.FAILED, "harness_error", reason)


async def wind_down(
    proc: SandboxedProcess | None,
    agent_turn: AgentTurn | None,
    agen: AsyncIterator[ev.AgentEvent] | None,
    pending: asyncio.Future[ev.AgentEvent] | None,
    outcome: Outcome,
    grace_seconds: float,
) -> None:
    """Stop the CLI: a clean interrupt when the turn was cut short, then a kill."""
    if proc is None:
        return
    try:
        if outcome.status in CUT_SHORT and agent_turn is not None:
            with contextlib.suppress(Exception):
                await agent_turn.interrupt()
        else:
            # Closing stdin lets the CLI flush its transcript and exit on its own.
            with contextlib.suppress(Exception):
                await proc.close_stdin()
        await _drain(agen, pending, grace_seconds)
    finally:
        await proc.kill()
        if agen is not None:
            with contextlib.suppress(BaseException):
                await agen.aclose()  # type: ignore[attr-defined]


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
