"""Admission control: at most N turns run their sandbox at once; the others wait in order.

Platforms submit many tasks at once; refusing them would fail rows that only needed to wait.
A turn takes a slot before its sandbox starts and gives it back when its process is gone (or
while it is paused waiting for the user). Waiters are served strictly first come, first
served; a waiter that gives up (its task was cancelled) leaves the line at once.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Protocol


class Admission(Protocol):
    """A turn's way to a slot: this queue in one process, engine/replicas/shared_admission.py over
    replicas. `holder` is the turn's response id."""

    async def acquire(self, holder: str) -> None: ...

    def release(self, holder: str) -> None: ...


class AdmissionQueue:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the turn limit must be at least 1")
        self.limit = limit
        self._running = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.done())

    async def acquire(self, holder: str = "") -> None:
        """Wait for a slot, in arrival order. Cancelling the wait leaves the line at once."""
        if self._running < self.limit and not self._waiters:
            self._running += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # granted in the same instant: pass the slot on
            else:
                self._waiters.remove(waiter)
            raise

    def release(self, holder: str = "") -> None:
        """Give a slot back: the longest waiter takes it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on; `running` is unchanged
                return
        self._running -= 1
