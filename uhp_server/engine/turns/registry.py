"""The registry of live tasks: start them, find them, stop them, forget them when done."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from storage import session_listing
from storage import sessions as session_store
from storage.db import Database
from storage.unit import Tx
from uhp_server.catalog import ModelRoute
from uhp_server.engine.reading.feed import HarnessFeed, feed_event
from uhp_server.engine.replicas.peers import Peers
from uhp_server.engine.requests import TaskStatus, ToolAnswer
from uhp_server.engine.turns import questions
from uhp_server.engine.turns.executor import TurnExecutor
from uhp_server.engine.turns.run import Run, StopReason
from uhp_server.gateway.providers import Provider, provider_secrets

log = logging.getLogger("uhp_server.runs")

# Finished runs stay reachable in memory this long, for store=false read-backs by an
# idempotent retry; after that only the database remembers them.
LINGER_SECONDS = 600.0
# How long a cancel waits for the turn to write its own terminal event before writing it
# itself: room for the turn's artifact collection (turn.CANCELLED_COLLECT_SECONDS), and still
# an answer within the second.
CANCEL_TURN_WAIT = 0.45
# A session release that met the database away is tried again after this, doubling to the max.
RELEASE_RETRY_SECONDS = 0.5
RELEASE_RETRY_MAX_SECONDS = 30.0


class RunRegistry:
    def __init__(
        self,
        db: Database,
        executor: TurnExecutor,
        peers: Peers,
        feed: HarnessFeed | None = None,
        paused_keep_seconds: float = 45.0,
        replica_id: str | None = None,
    ) -> None:
        self.db = db
        self.replica_id = replica_id  # recorded on the responses this process runs
        # The other replicas, where a task may run instead (engine/replicas/peers.py).
        self.peers = peers
        self.executor = executor
        self.feed = feed or HarnessFeed()
        self.paused_keep_seconds = paused_keep_seconds  # UHP_PAUSED_TURN_KEEP_SECONDS
        self._forwarders: dict[str, asyncio.Task[None]] = {}  # by response id, while live
        self._live: dict[str, Run] = {}  # by response id, until LINGER_SECONDS after the end
        self._running: dict[str, Run] = {}  # by session id, until the terminal event
        self._last: dict[str, Run] = {}  # by session id, until its process is gone
        self._finished_at: dict[str, float] = {}
        self._releasing: set[asyncio.Task[None]] = set()  # sessions released after a failure
        # Each finished turn whose agent holds a memory, sent on (engine/facade/agent_memories.py
        # `observe`): (the turn's memory, its response, what was asked).
        self.observe: Callable[[Any, dict[str, Any], str], Awaitable[None]] | None = None

    def get(self, response_id: str) -> Run | None:
        return self._live.get(response_id)

    def running(self) -> list[Run]:
        """The runs whose terminal event is not written yet."""
        return list(self._running.values())

    def for_session(self, session_id: str) -> Run | None:
        """The task running in the session now, if any."""
        return self._running.get(session_id)

    def by_token(self, token: str) -> Run | None:
        """The running turn whose gateway token this is."""
        for run in self._running.values():
            if run.grant is not None and run.grant.token == token:
                return run
        return None

    async def ask(self, run: Run, text: str, options: tuple[str, ...] = ()) -> str | None:
        """The agent of `run` asks the user; the answer, or None once the turn is parked."""
        if run.native_session_id:
            await self.db.write(
                session_store.set_native_session_id, run.session_id, run.native_session_id
            )
        return await questions.ask(run, text, options, self.paused_keep_seconds, self.peers.board)

    async def ask_by_token(self, token: str, text: str, options: tuple[str, ...]) -> str | None:
        """The question tool's call, made with a turn's gateway token."""
        run = self.by_token(token)
        return None if run is None else await self.ask(run, text, options)

    @staticmethod
    def deliver_answers(run: Run, answers: list[ToolAnswer]) -> None:
        questions.deliver(run, answers)

    @staticmethod
    def switch_connection(run: Run, provider: Provider) -> None:
        """A door's fresh model connection: the turn's model calls go there from now on
        (a turn not started yet starts with it)."""
        if run.log.ending:
            return
        if not provider.models:
            return
        model = provider.models[0]
        route = ModelRoute(model, provider, model)
        run.log.guard(provider_secrets(provider))
        if run.grant is not None:
            run.grant.use(provider)
            run.grant.model = model
        elif run.plan.route is not None:
            run.plan = dataclasses.replace(run.plan, route=route)

    def start(self, run: Run) -> None:
        self._prune()
        run.after = self._last.get(run.session_id)
        self._live[run.response_id] = run
        self._running[run.session_id] = run
        self._last[run.session_id] = run
        run.task = asyncio.create_task(self._execute(run), name=f"turn {run.response_id}")
        self._forwarders[run.response_id] = asyncio.create_task(self._forward(run))

    async def _forward(self, run: Run) -> None:
        """Pass the run's lifecycle on to the harness events feed."""
        response = run.builder.response
        harness_id = response["metadata"].get("harness_id", "")
        try:
            async for event in run.log.follow():
                for item in feed_event(
                    event,
                    response_id=run.response_id,
                    session_id=run.session_id,
                    harness_id=harness_id,
                    new_session=response.get("previous_response_id") is None,
                ):
                    self.feed.publish(run.principal_id, harness_id, item)
        finally:
            self._forwarders.pop(run.response_id, None)

    async def _execute(self, run: Run) -> None:
        try:
            await self.executor.execute(run, self._on_terminal, self.ask)
            await self._observed(run)
        except Exception:
            log.exception("turn_crashed", extra={"response_id": run.response_id})
            await self._end_crashed(run)
            self._on_terminal(run)
        finally:
            forwarder = self._forwarders.get(run.response_id)
            if forwarder is not None and not run.log.finished:
                forwarder.cancel()  # a crashed run never ends its log: stop following it
            if self._last.get(run.session_id) is run:
                del self._last[run.session_id]
            self._finished_at.pop(run.response_id, None)  # (kept in the order they finished)
            self._finished_at[run.response_id] = time.monotonic()

    async def _observed(self, run: Run) -> None:
        """The finished turn, to its agent's default memory (Memories §9.1), once its end is
        recorded: never the turn's outcome, nor its session's next turn, waits on it."""
        memory = run.plan.memory
        if memory is None or self.observe is None or not run.log.finished or not run.plan.store:
            return  # a `store: false` task's turn is kept nowhere, its memory included
        try:
            await self.observe(memory, run.log.current(), run.plan.prompt)
        except Exception:
            log.exception("memory_observe_failed", extra={"response_id": run.response_id})

    @staticmethod
    async def _end_crashed(run: Run) -> None:
        """A run that crashed still ends its log, so no stream or waiter hangs on it."""
        if run.log.ending:
            return
        error = {
            "type": "harness_error",
            "code": "harness_error",
            "message": "The task failed inside the server.",
            "param": None,
            "detail": None,
        }
        try:
            await run.log.append(run.builder.finish(TaskStatus.FAILED, error=error))
        except Exception:
            log.exception("turn_crash_unrecorded", extra={"response_id": run.response_id})

    def _on_terminal(self, run: Run) -> None:
        """The task is over: its session takes the next task at once."""
        if self._running.get(run.session_id) is not run:
            return
        del self._running[run.session_id]
        if run.log.released or run.abandoned:  # released with the terminal event, or elsewhere
            return
        # The terminal event's write failed (the database was out of reach): released on the
        # writer once it answers again.
        status = run.log.current()["status"] if run.log.finished else "failed"
        releasing = asyncio.create_task(self._release_when_possible(run, status))
        self._releasing.add(releasing)
        releasing.add_done_callback(self._releasing.discard)

    async def _release_when_possible(self, run: Run, status: str) -> None:
        """Tried until the database answers: a session left held would refuse its
        conversation's next turn for good."""
        delay = RELEASE_RETRY_SECONDS
        while True:
            try:
                await self.db.write(self._release_unrecorded, run, status)
                return
            except Exception:
                log.warning("session_release_failed", exc_info=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RELEASE_RETRY_MAX_SECONDS)

    @staticmethod
    def _release_unrecorded(tx: Tx, run: Run, status: str) -> None:
        if not run.log.persist:
            session_listing.record_status(tx, run.response_id, status)
        session_store.release_session(
            tx, run.session_id, run.response_id, status, run.native_id_to_keep()
        )

    async def cancel(self, run: Run) -> None:
        """Request a stop; the terminal event is written before this returns.

        The turn itself writes it once it sees the stop (with the artifacts it can collect in
        time). When it has not within CANCEL_TURN_WAIT — a busy server is slow to schedule
        it — the cancel writes `cancelled` itself, and the turn, seeing the log ended, only
        winds its process down."""
        run.request_stop(StopReason.CANCEL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.log.wait_finished(), timeout=CANCEL_TURN_WAIT)
        if not run.log.ending:
            await run.log.append(run.builder.finish(TaskStatus.CANCELLED))
            self._on_terminal(run)  # the session takes its next task at once, as usual
        with contextlib.suppress(TimeoutError):  # the turn's own terminal event, if in flight
            await asyncio.wait_for(run.log.wait_finished(), timeout=CANCEL_TURN_WAIT)

    @staticmethod
    def abandon(run: Run) -> None:
        """Let go of a turn this replica no longer runs as far as the database knows (another
        replica took it over, or this one's lease lapsed while the database was out of reach):
        its process stops, it ends `failed` for this replica's own readers, and nothing more of
        it is stored, nor its session released; the database's account of it is the
        cluster's (engine/replicas/cluster.py)."""
        if run.log.ending or run.abandoned:
            return
        run.log.persist = False
        run.log.release_on_end = None  # its session is the database's owner's to release
        run.request_stop(StopReason.ABANDON)

    async def time_out(self, run: Run, details: dict[str, Any]) -> None:
        """End the turn now as `incomplete` with `details` (a caller's deadline fired); like
        `cancel`, the terminal event is written before this returns."""
        run.request_stop(StopReason.TIME_OUT, details)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.log.wait_finished(), timeout=CANCEL_TURN_WAIT)
        if not run.log.ending:
            await run.log.append(
                run.builder.finish(TaskStatus.INCOMPLETE, incomplete_details=details)
            )
            self._on_terminal(run)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.log.wait_finished(), timeout=CANCEL_TURN_WAIT)

    async def end_warm(self, session_id: str) -> None:
        """End the session's process kept warm for its next turn, if any (engine/turns/warm.py):
        a cancel or the session's deletion."""
        if self.executor.warm is not None:
            await self.executor.warm.end(session_id)

    async def end_warm_after(self, response_id: str) -> None:
        """End the warm process the turn of `response_id` left, if it still idles."""
        if self.executor.warm is not None:
            await self.executor.warm.end_after(response_id)

    async def end_warm_harness(self, harness_id: str) -> None:
        """End the warm processes of a harness that changed or was deleted."""
        if self.executor.warm is not None:
            await self.executor.warm.end_harness(harness_id)

    async def wait_stopped(self, session_id: str, timeout: float) -> None:
        """Wait (bounded) until no process of the session's turns is left running."""
        run = self._last.get(session_id)
        if run is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.stopped.wait(), timeout)

    def forget(self, response_id: str) -> None:
        """Drop a finished run from memory at once (its response was deleted)."""
        run = self._live.get(response_id)
        if run is not None and run.log.finished:
            del self._live[response_id]
            self._finished_at.pop(response_id, None)

    async def shutdown(self) -> None:
        """Server stopping: stop every live turn so no sandbox outlives the server."""
        runs = [run for run in self._live.values() if run.task and not run.task.done()]
        for run in runs:
            if run.asking:  # waiting for the user: parked, so the answer still continues it
                questions.park(run)
            else:
                run.request_stop(StopReason.CANCEL)
        tasks = [run.task for run in runs if run.task]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        if self.executor.warm is not None:  # no warm process outlives the server either
            await self.executor.warm.close()
        for releasing in list(self._releasing):  # the next start's recovery frees those
            releasing.cancel()

    def _prune(self) -> None:
        """Forget the runs that finished over LINGER_SECONDS ago: the oldest come first in
        `_finished_at`, so this looks at those it forgets and one more (not at every run
        of the last ten minutes, at every start)."""
        cutoff = time.monotonic() - LINGER_SECONDS
        while self._finished_at:
            response_id, finished = next(iter(self._finished_at.items()))
            if finished >= cutoff:
                return
            self._live.pop(response_id, None)
            del self._finished_at[response_id]
