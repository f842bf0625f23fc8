"""The turns a base instance is running, so `interrupt(proc)` can reach the right one.

One base instance serves every session at once; the engine names a turn only by the
process it started, so each base keeps its live turns keyed by that process.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Generic, Protocol, TypeVar

from harness_bases.events import AgentEvent

log = logging.getLogger(__name__)


class Interruptible(Protocol):
    async def interrupt(self) -> bool:
        """Ask the CLI to stop the turn; True when the request was sent."""
        ...


LiveT = TypeVar("LiveT", bound=Interruptible)


class LiveTurns(Generic[LiveT]):
    """`name` prefixes the log event of a failed interrupt (`<name>_interrupt_failed`)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._live: dict[int, LiveT] = {}

    async def follow(
        self, proc: object, live: LiveT, events: AsyncGenerator[AgentEvent, None]
    ) -> AsyncIterator[AgentEvent]:
        """Yield the turn's events with `live` registered for proc until they end or the
        caller closes this generator (which closes `events` too)."""
        self._live[id(proc)] = live
        try:
            async with contextlib.aclosing(events) as stream:
                async for event in stream:
                    yield event
        finally:
            # Only our own entry: a second drive() of the same process may have replaced it.
            if self._live.get(id(proc)) is live:
                del self._live[id(proc)]

    async def interrupt(self, proc: object) -> bool:
        """Interrupt the turn proc runs; False when there is none or the request failed (the
        engine then kills the sandbox after its grace period)."""
        live = self._live.get(id(proc))
        if live is None:
            return False
        try:
            return await live.interrupt()
        except Exception:
            log.warning(f"{self._name}_interrupt_failed", exc_info=True)
            return False
