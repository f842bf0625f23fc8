"""Waiting in async tests for a condition the code under test makes true."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable


async def wait_for(
    condition: Callable[[], object | Awaitable[object]], timeout: float = 5.0
) -> None:
    """Return once `condition()` (a plain or an async callable) is true; fail the test if it
    is not within `timeout` seconds. Looks every 10 ms, yielding to the loop in between."""
    deadline = time.monotonic() + timeout
    while True:
        met = condition()
        if inspect.isawaitable(met):
            met = await met
        if met:
            return
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
