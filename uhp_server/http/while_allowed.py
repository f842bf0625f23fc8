"""A stream that lasts only as long as its caller may still read it.

A stream is authorised once, when it opens, but may stay open for as long as a turn runs.
Signing out and revoking a key take effect at once for every other request, so an open
stream asks again too: as items come and while none do, at most once every `every` seconds
(a lookup per stream per second, never one per item). When the answer is no, the iteration
ends as if the source had, and the stream's own ending (an `end` message, or just the close)
follows.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar, cast

T = TypeVar("T")

CHECK_EVERY_SECONDS = 1.0
PUMP_AHEAD = 256  # items read from the source ahead of the reader, at most
_DONE = object()  # what the pump queues after the source's last item


async def while_allowed(
    items: AsyncIterator[T],
    allowed: Callable[[], Awaitable[bool]],
    every: float = CHECK_EVERY_SECONDS,
) -> AsyncIterator[T]:
    """`items`, until they end or `allowed()` stops holding. It is asked whenever its last
    yes is `every` seconds old, items flowing or not, so nothing is passed on more than
    `every` seconds after a yes. An error of the source's is raised here."""
    # Bounded, so that a slow reader still holds the source back as it did without the check.
    queue: asyncio.Queue[object] = asyncio.Queue(maxsize=PUMP_AHEAD)
    pump = asyncio.create_task(_pump(items, queue))
    checked = time.monotonic()
    try:
        while True:
            if time.monotonic() - checked >= every:
                if not await allowed():
                    return
                checked = time.monotonic()
            wait = max(0.001, checked + every - time.monotonic())
            try:
                item = await asyncio.wait_for(queue.get(), timeout=wait)
            except TimeoutError:
                if pump.done() and queue.empty():
                    break  # the source failed with the queue full: its error is raised below
                continue  # a quiet spell: time to ask again
            if item is _DONE:
                break
            yield cast(T, item)
        await pump  # the source's error, if it ended with one
    finally:
        if not pump.done():
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump


async def _pump(items: AsyncIterator[T], queue: asyncio.Queue[object]) -> None:
    try:
        async for item in items:
            await queue.put(item)
    except BaseException:
        # The source failed (or the reader left): the marker if there is room, else the
        # reader finds the pump done once it has taken what is queued.
        with contextlib.suppress(asyncio.QueueFull):
            queue.put_nowait(_DONE)
        raise
    await queue.put(_DONE)
