"""Waiting for a door's task: to its end, within a caller's budget, and its result object.

A platform calling a tool gives up after its own timeout; an answer after that is lost and
counted as a failure. So the turn's own whole-second budget is set a margin below the call's
(the turn then ends `incomplete` with what it did, artifacts collected), and when the call's
deadline comes first — short budgets, or a slow start — the engine ends the turn at once as
`incomplete` with the timeout reason, just in time for the answer to reach the platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

from uhp_server.doors.harness_result import harness_result
from uhp_server.engine import CANCEL_TURN_WAIT, TERMINAL_TYPES, Engine

# Room left between the turn's own budget and the call's: collecting artifacts and writing
# the answer. A call's budget below twice this gives the turn half of it.
_WIND_DOWN_SECONDS = 2.0
# The call's deadline fires this long before its budget: the engine's time-out writes the
# terminal event within CANCEL_TURN_WAIT, and the answer still needs writing.
_DEADLINE_MARGIN_SECONDS = CANCEL_TURN_WAIT + 0.2


def turn_budget(call_budget: float) -> int:
    """The turn's whole-second wall-clock budget inside a call's budget."""
    margin = min(_WIND_DOWN_SECONDS, call_budget / 2)
    return max(1, math.floor(call_budget - margin))


async def until_terminal(engine: Engine, principal_id: str, response_id: str) -> None:
    """Return once the response's terminal event is written."""
    async for event in engine.follow(principal_id, response_id):
        if event.get("type") in TERMINAL_TYPES:
            return


async def finish_within(
    engine: Engine, principal_id: str, response_id: str, call_budget: float, started: float
) -> dict[str, Any]:
    """The finished response, waited for until just before the call's budget is spent; then
    the turn is ended `incomplete` for the timeout (its terminal event is written first)."""
    elapsed = asyncio.get_running_loop().time() - started
    left = call_budget - elapsed - _DEADLINE_MARGIN_SECONDS
    try:
        await asyncio.wait_for(until_terminal(engine, principal_id, response_id), max(0.0, left))
    except TimeoutError:
        with contextlib.suppress(Exception):
            await engine.time_out(principal_id, response_id, call_budget)
    return (await engine.state(principal_id, response_id)).response


async def task_result(engine: Engine, response: dict[str, Any], base_url: str) -> dict[str, Any]:
    """The result object of a finished response; download links on `base_url` (else the
    configured public origin)."""
    origin = engine.settings.public_base_url or base_url
    return harness_result(response, await engine.turn_files(response["id"], origin))
