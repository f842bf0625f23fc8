"""Admission control: at most N turns run their sandbox at once; the others wait, fairly.

Platforms submit many tasks at once; refusing them would fail rows that only needed to wait.
A turn takes a slot before its sandbox starts and gives it back when its process is gone (or
while it is paused waiting for the user). A waiter that gives up (its task was cancelled)
leaves the line at once.

Slots are shared between principals, so that one principal's flood cannot make another's short
task wait behind all of it:

- **A share per principal.** No principal holds more than `per_principal` slots at once (by
  default one less than the limit: a slot stays free for somebody else, so another
  principal's task starts at once instead of waiting for a turn of the flood to end).
- **Round-robin between principals.** A free slot goes to the waiting principal below its
  share that holds the fewest slots; between equals, to the one served longest ago. Each
  principal's own turns keep their arrival order.
- **A visible place in line.** `position` is where a waiting turn stands in the order the line
  would be served in if nothing else arrived (1: the next one).
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
from dataclasses import dataclass, field
from typing import Protocol


class Admission(Protocol):
    """A turn's way to a slot: this queue in one process, engine/replicas/shared_admission.py over
    replicas. `holder` is the turn's response id, `principal` whose turn it is."""

    async def acquire(self, holder: str, principal: str) -> None: ...

    def release(self, holder: str) -> None: ...

    def position(self, holder: str) -> int | None:
        """The waiting turn's place in line (1: the next), None when it does not wait here."""
        ...


def share_per_principal(limit: int, configured: int | None) -> int:
    """The most slots one principal holds at once: `configured` (at most the limit), else one
    less than the limit, so that a slot is always left for another principal (with a limit of
    1, that one slot)."""
    if configured is not None:
        return max(1, min(configured, limit))
    return max(1, limit - 1)


@dataclass(eq=False)
class _Waiter:
    holder: str
    principal: str
    granted: asyncio.Future[None]


@dataclass
class _Line:
    """One principal's waiting turns, in arrival order."""

    joined_at: int  # the arrival count when its first waiter came
    waiters: collections.deque[_Waiter] = field(default_factory=collections.deque)


class AdmissionQueue:
    def __init__(self, limit: int, per_principal: int | None = None) -> None:
        if limit < 1:
            raise ValueError("the turn limit must be at least 1")
        self.limit = limit
        self.per_principal = share_per_principal(limit, per_principal)
        self._holders: dict[str, str] = {}  # a running turn -> its principal
        self._held: collections.Counter[str] = collections.Counter()  # slots per principal
        self._lines: dict[str, _Line] = {}  # principals with waiting turns
        # When each principal holding or waiting for a slot last got one (a count of grants).
        self._served_at: dict[str, int] = {}
        self._grants = 0
        self._arrivals = itertools.count()

    @property
    def running(self) -> int:
        return len(self._holders)

    @property
    def waiting(self) -> int:
        return sum(len(line.waiters) for line in self._lines.values())

    async def acquire(self, holder: str, principal: str = "") -> None:
        """Wait for a slot, fairly (above). Cancelling the wait leaves the line at once."""
        if self._free and principal not in self._lines and self._below_share(principal):
            self._grant(holder, principal)
            return
        line = self._lines.get(principal)
        if line is None:
            line = self._lines[principal] = _Line(joined_at=next(self._arrivals))
        waiter = _Waiter(holder, principal, asyncio.get_running_loop().create_future())
        line.waiters.append(waiter)
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self.release(holder)  # granted in the same instant: pass the slot on
            else:
                self._leave(waiter)
            raise

    def release(self, holder: str) -> None:
        """Give a slot back: the waiters it lets in take it (above)."""
        principal = self._holders.pop(holder, None)
        if principal is None:
            return
        self._held[principal] -= 1
        if not self._held[principal]:
            del self._held[principal]
            if principal not in self._lines:
                self._served_at.pop(principal, None)  # nothing of it is left here
        self._serve()

    def position(self, holder: str) -> int | None:
        """Where a waiting turn stands: the line served as it is now, each principal's turns
        counted as holding a slot once served, shares aside (a share only delays a principal
        until one of its own turns ends)."""
        order = [self._rank(principal) for principal in self._lines]
        heapq.heapify(order)
        served = dict.fromkeys(self._lines, 0)
        grants = self._grants
        place = 0
        while order:
            held, _, joined, principal = heapq.heappop(order)
            waiters = self._lines[principal].waiters
            place += 1
            if waiters[served[principal]].holder == holder:
                return place
            served[principal] += 1
            grants += 1
            if served[principal] < len(waiters):
                heapq.heappush(order, (held + 1, grants, joined, principal))
        return None

    # -- the line ---------------------------------------------------------------------------
    @property
    def _free(self) -> bool:
        return len(self._holders) < self.limit

    def _below_share(self, principal: str) -> bool:
        return self._held[principal] < self.per_principal

    def _rank(self, principal: str) -> tuple[int, int, int, str]:
        """A waiting principal's claim to the next slot, the smallest first: the slots it
        holds, when it was last served, when it began to wait."""
        served_at = self._served_at.get(principal, -1)
        return self._held[principal], served_at, self._lines[principal].joined_at, principal

    def _grant(self, holder: str, principal: str) -> None:
        self._holders[holder] = principal
        self._held[principal] += 1
        self._grants += 1
        self._served_at[principal] = self._grants

    def _serve(self) -> None:
        """Free slots to the waiters they may go to, one at a time, fairest first."""
        while self._free:
            principal = self._next_principal()
            if principal is None:
                return
            line = self._lines[principal]
            waiter = line.waiters.popleft()
            if not line.waiters:
                del self._lines[principal]
            if waiter.granted.done():  # cancelled, its task not yet told: it leaves
                continue
            self._grant(waiter.holder, principal)
            waiter.granted.set_result(None)

    def _next_principal(self) -> str | None:
        """The waiting principal below its share with the fewest slots; between equals the
        one served longest ago, then the one waiting longest."""
        ranks = [self._rank(p) for p in self._lines if self._below_share(p)]
        return min(ranks)[3] if ranks else None

    def _leave(self, waiter: _Waiter) -> None:
        line = self._lines.get(waiter.principal)
        if line is None or waiter not in line.waiters:
            return
        line.waiters.remove(waiter)
        if not line.waiters:
            del self._lines[waiter.principal]
            if not self._held[waiter.principal]:
                self._served_at.pop(waiter.principal, None)
