"""The other replicas, as the engine sees them: `Peers`, handed to the run registry when it is
made. One process alone has none (`NoPeers`); replicas sharing a PostgreSQL database have the
cluster (engine/replicas/cluster.py). Nothing in the engine asks which: it asks its peers, and none
answers for a single process.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Protocol

from uhp_server.engine.reading.feed import HarnessFeed
from uhp_server.engine.requests import ToolAnswer
from uhp_server.engine.turns.questions import QuestionBoard
from uhp_server.engine.turns.run import Run


class LocalRuns(Protocol):
    """What the other replicas may do to this replica's runs (engine/turns/registry.py's registry):
    find them, stop them as a cancel or a deadline would, let them go, feed their events."""

    feed: HarnessFeed

    def get(self, response_id: str) -> Run | None: ...

    def running(self) -> list[Run]: ...

    async def cancel(self, run: Run) -> None: ...

    async def time_out(self, run: Run, details: dict[str, Any]) -> None: ...

    def abandon(self, run: Run) -> None: ...


class Peers(Protocol):
    """What the engine asks of the other replicas about a task running there."""

    @property
    def shared(self) -> bool:
        """Whether a task may run on another replica (then the database says how it stands
        there: queued, waiting for an answer)."""
        ...

    @property
    def board(self) -> QuestionBoard | None:
        """Where a question this replica's turn waits on is shown to the others."""
        ...

    async def open(self, runs: LocalRuns) -> None:
        """At start: recover what no live replica runs, then keep in touch with the others."""
        ...

    async def close(self) -> None: ...

    async def relay_cancel(self, response_id: str, details: dict[str, Any] | None = None) -> None:
        """Stop a task running elsewhere (`details`: a deadline's, ending it `incomplete`)
        and wait (bounded) for its terminal event."""
        ...

    async def relay_answers(self, response_id: str, answers: list[ToolAnswer]) -> bool:
        """Hand answers to the replica whose live turn waits on them; False when it no
        longer waits (parked, answered, over)."""
        ...

    async def park_elsewhere(self, response_id: str, call_ids: list[str]) -> bool:
        """Ask the replica whose live turn waits on these calls to park it, and wait (bounded)
        for its end; False when it no longer waits on them."""
        ...

    async def wait_finished(self, response_id: str) -> None:
        """Until a task running elsewhere is over."""
        ...

    def follow(self, response_id: str, after: int = -1) -> AsyncIterator[dict[str, Any]]:
        """The events of a task running elsewhere after `after`, as they are committed."""
        ...

    def events_heard(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Entered once the other replicas' events reach this one's harness feed."""
        ...


class NoPeers:
    """A single process: no task runs anywhere else."""

    def __init__(self, recover: Any) -> None:
        self._recover = recover  # () -> awaitable: start-up recovery (engine/turns/recovery.py)

    @property
    def shared(self) -> bool:
        return False

    @property
    def board(self) -> QuestionBoard | None:
        return None

    async def open(self, runs: LocalRuns) -> None:
        await self._recover()

    async def close(self) -> None:
        return None

    async def relay_cancel(self, response_id: str, details: dict[str, Any] | None = None) -> None:
        return None

    async def relay_answers(self, response_id: str, answers: list[ToolAnswer]) -> bool:
        return False

    async def park_elsewhere(self, response_id: str, call_ids: list[str]) -> bool:
        return False

    async def wait_finished(self, response_id: str) -> None:
        return None

    async def follow(self, response_id: str, after: int = -1) -> AsyncIterator[dict[str, Any]]:
        return
        yield  # (an async generator that yields nothing)

    @contextlib.asynccontextmanager
    async def events_heard(self) -> AsyncIterator[None]:
        yield
