"""The registry of live tasks: start them, find them, stop them, forget them when done."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from storage import sessions as session_store
from storage.db import Database
from uhp_server.engine.turn import Run, TurnExecutor

log = logging.getLogger("uhp_server.runs")

# Finished runs stay reachable in memory this long, for store=false read-backs by an
# idempotent retry; after that only the database remembers them.
LINGER_SECONDS = 600.0


class RunManager:
    def __init__(self, db: Database, executor: TurnExecutor) -> None:
        self.db = db
        self.executor = executor
        self._live: dict[str, Run] = {}
        self._by_session: dict[str, Run] = {}
        self._finished_at: dict[str, float] = {}

    def get(self, response_id: str) -> Run | None:
        return self._live.get(response_id)

    def for_session(self, session_id: str) -> Run | None:
        return self._by_session.get(session_id)

    def start(self, run: Run) -> None:
        self._prune()
        self._live[run.response_id] = run
        self._by_session[run.session_id] = run
        run.task = asyncio.create_task(self._execute(run), name=f"turn {run.response_id}")

    async def _execute(self, run: Run) -> None:
        try:
            await self.executor.execute(run)
        finally:
            final = run.log.current() if run.log.finished else None
            status = final["status"] if final else "failed"
            session_store.release_session(
                self.db, run.session_id, run.response_id, status, run.native_session_id
            )
            if self._by_session.get(run.session_id) is run:
                del self._by_session[run.session_id]
            self._finished_at[run.response_id] = time.monotonic()

    async def cancel(self, run: Run) -> None:
        """Request a stop and wait (briefly) until the terminal event is written."""
        run.stop.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.log.wait_finished(), timeout=0.9)

    async def shutdown(self) -> None:
        """Server stopping: stop every live turn so no sandbox outlives the server."""
        runs = [run for run in self._live.values() if run.task and not run.task.done()]
        for run in runs:
            run.stop.set()
        tasks = [run.task for run in runs if run.task]
        if tasks:
            await asyncio.wait(tasks, timeout=10)

    def _prune(self) -> None:
        cutoff = time.monotonic() - LINGER_SECONDS
        for response_id, finished in list(self._finished_at.items()):
            if finished < cutoff:
                self._live.pop(response_id, None)
                del self._finished_at[response_id]
