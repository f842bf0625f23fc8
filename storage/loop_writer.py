"""PostgreSQL's writer on the event loop: the thread writer's order (storage/thread_writer.py)
with the event log's commits sent from the loop (storage/loop_link.py says why).

Jobs and event batches leave in the order they were queued, as on the thread writer: a job
(ORM work, which blocks) runs on a thread of its own and the batches behind it wait for it;
consecutive batches share one commit, a single statement where event_batches.events_at_once can
make one. Anything may queue from any thread; only the loop sends.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from storage import event_batches
from storage.event_batches import EventBatch, Queued, event_inserts, events_at_once
from storage.loop_link import Disconnected, LoopLink, numbered

if TYPE_CHECKING:
    from storage.db import Database

T = TypeVar("T")
_STOP = object()


class LoopWriter:
    def __init__(
        self,
        db: Database,
        link: LoopLink,
        loop: asyncio.AbstractEventLoop,
        reconnect_seconds: float,
        after: Callable[[], None] | None = None,
    ) -> None:
        """`after`: a blocking call to make before the first write (the thread writer's stop,
        which writes what was queued on it first)."""
        self._db = db
        self._reconnect_seconds = reconnect_seconds
        self._link = link
        self._loop = loop
        self._loop_thread = threading.get_ident()  # made on the loop, by Database.bind_loop
        self._queue: deque[Any] = deque()
        self._queued = asyncio.Event()
        self._jobs = ThreadPoolExecutor(1, thread_name_prefix="db-write")
        self._conn: asyncpg.Connection | None = None
        self._task = loop.create_task(self._run(after), name="db-write")

    # -- from any thread ---------------------------------------------------------------------
    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._put((fn, future))
        return future

    def append(self, batch: EventBatch) -> Future[None]:
        future: Future[None] = Future()
        self._put((batch, future))
        return future

    @property
    def alive(self) -> bool:
        return not self._task.done()

    def _put(self, item: Any) -> None:
        if threading.get_ident() == self._loop_thread:
            self._enqueue(item)
        else:
            self._loop.call_soon_threadsafe(self._enqueue, item)

    def _enqueue(self, item: Any) -> None:
        self._queue.append(item)
        self._queued.set()

    # -- on the loop -------------------------------------------------------------------------
    async def stop(self) -> None:
        """Write what is queued, then stop."""
        self._enqueue(_STOP)
        try:
            await asyncio.wait([self._task])  # a writer that died has nothing left to write
        finally:
            self._jobs.shutdown(wait=True)
            if self._conn is not None:
                self._conn.terminate()
                self._conn = None

    async def _run(self, after: Callable[[], None] | None) -> None:
        if after is not None:
            await self._loop.run_in_executor(self._jobs, after)
        while True:
            if not self._queue:
                self._queued.clear()
                await self._queued.wait()
                continue
            item = self._queue.popleft()
            if item is _STOP:
                return
            work, future = item
            if not isinstance(work, EventBatch):
                await self._job(work, future)
                continue
            group = [item]  # everything that queued up meanwhile joins this commit
            while self._queue and self._queue[0] is not _STOP:
                if not isinstance(self._queue[0][0], EventBatch):
                    break
                group.append(self._queue.popleft())
            await self._commit(group)

    async def _job(self, fn: Callable[[], Any], future: Future[Any]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(await self._loop.run_in_executor(self._jobs, fn))
        except asyncio.CancelledError as exc:  # the loop is going away: so is the writer
            future.set_exception(exc)
            raise
        except BaseException as exc:  # the caller's to see; the writer goes on
            future.set_exception(exc)

    async def _commit(self, group: list[Queued], *, reconnected: bool = False) -> None:
        started = time.perf_counter()
        try:
            conn = await self._connection()
        except Exception as exc:  # the database stayed away: this group fails, not the writer
            event_batches.failed(group, exc)
            return
        try:
            rows, ends = event_batches.group_writes(group)
            at_once = events_at_once(rows, ends)
            if at_once is not None:
                if at_once[0]:
                    await conn.execute(*_as_asyncpg(*at_once))
            else:
                async with conn.transaction():
                    for statement, values in event_inserts(rows):
                        await conn.execute(*_as_asyncpg(statement, values))
                    for end in ends:
                        await conn.execute(*_as_asyncpg(self._db.dialect.sql(end.sql), end.params))
        except Exception as exc:
            await self._after_failure(group, exc, conn, reconnected)
            return
        observe = self._db.on_event_commit
        if observe is not None:
            observe(time.perf_counter() - started)
        event_batches.committed(group)

    async def _after_failure(
        self, group: list[Queued], error: Exception, conn: asyncpg.Connection, reconnected: bool
    ) -> None:
        lost = conn.is_closed() or isinstance(error, Disconnected)
        if lost:
            conn.terminate()
            self._conn = None
        if lost and not reconnected:
            # The database's end of the link went away (a restart, a failover): once more on a
            # new connection. Had the commit itself landed, the rows' primary keys refuse the
            # second write, so nothing is ever written twice.
            await self._commit(group, reconnected=True)
        elif len(group) > 1:
            for single in group:  # one bad batch must not fail the others
                await self._commit([single], reconnected=True)
        else:
            event_batches.failed(group, error)

    async def _connection(self) -> asyncpg.Connection:
        """The writer's connection, reopened while the database is away (a PostgreSQL restart
        takes seconds) for up to its reconnect seconds; then what the last attempt raised."""
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        deadline = time.monotonic() + self._reconnect_seconds
        delay = 0.1
        while True:
            try:
                self._conn = await self._link.connect()
                return self._conn
            except Exception:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)


def _as_asyncpg(statement: str, values: list[Any] | tuple[Any, ...]) -> list[Any]:
    sql, numbered_values = numbered(statement, values)
    return [sql, *numbered_values]
