"""Run one tool call as an ordinary task and wait for its end within the caller's budget.

The platform calling a tool gives up after its own timeout; an answer after that is lost
and counted as a failure. So the turn's wall-clock budget is set a margin below the call's
budget (the turn then ends `incomplete` with what it did, artifacts collected), and the call
waits for the terminal event until just before the budget, cancelling the turn as a last
resort.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass
from typing import Any

from uhp_server.context import AppContext
from uhp_server.engine.turn import Run
from uhp_server.frontdoors.harness_result import harness_result

# Room left between the turn's own budget and the call's: collecting artifacts and writing
# the answer. A call's budget below twice this gives the turn half of it.
_WIND_DOWN_SECONDS = 2.0
_ANSWER_SECONDS = 0.3  # the last resort: cancel this long before the call's budget


def turn_budget(call_budget: float) -> int:
    """The turn's whole-second wall-clock budget inside a call's budget."""
    margin = min(_WIND_DOWN_SECONDS, call_budget / 2)
    return max(1, math.floor(call_budget - margin))


async def finish_within(ctx: AppContext, run: Run, call_budget: float, started: float) -> None:
    """Wait for the run's terminal event until just before the call's budget is spent; past
    that, cancel it (its terminal event is written before the cancel returns)."""
    loop = asyncio.get_running_loop()
    left = call_budget - (loop.time() - started) - _ANSWER_SECONDS
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(run.log.wait_finished()), max(0.0, left))
        return
    await ctx.runs.cancel(run)


@dataclass(frozen=True)
class Finished:
    response: dict[str, Any]
    result: dict[str, Any]


async def render(ctx: AppContext, run: Run, base_url: str) -> Finished:
    response = run.log.current()
    result = await ctx.db.read(harness_result, ctx.db, response, base_url)
    return Finished(response, result)
