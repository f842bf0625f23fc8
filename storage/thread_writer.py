"""The one thread that writes (storage/db.py says why one): SQLite's writer, and PostgreSQL's
wherever the loop is not bound (storage/loop_writer.py is its twin on the loop)."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from storage import event_batches
from storage.event_batches import EventBatch

if TYPE_CHECKING:
    from storage.db import Database

T = TypeVar("T")
_STOP = object()


class ThreadWriter:
    """The one thread that writes. Jobs run in the order they were queued; consecutive event
    batches share one `BEGIN IMMEDIATE` transaction (group commit)."""

    def __init__(self, db: Database, reconnect_seconds: float) -> None:
        self._db = db
        self._reconnect_seconds = reconnect_seconds
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="db-write", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._jobs.put((fn, future))
        return future

    def append(self, batch: EventBatch) -> Future[None]:
        future: Future[None] = Future()
        self._jobs.put((batch, future))
        return future

    def stop(self) -> None:
        self._jobs.put(_STOP)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        carried: Any = None
        while True:
            job = carried if carried is not None else self._jobs.get()
            carried = None
            if job is _STOP:
                return
            work, future = job
            if not isinstance(work, EventBatch):
                _resolve(future, work)
                continue
            group = [job]
            while True:  # everything that queued up meanwhile joins this commit
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP or not isinstance(more[0], EventBatch):
                    carried = more
                    break
                group.append(more)
            try:
                conn = self._connection()
            except Exception as exc:  # the database stayed away: this group fails, not the writer
                event_batches.failed(group, exc)
                continue
            self._commit(conn, group)

    def _connection(self) -> Any:
        """The writer's connection, reopened while the database is away (a PostgreSQL restart
        takes seconds) for up to its reconnect seconds; then what the last attempt raised."""
        deadline = time.monotonic() + self._reconnect_seconds
        delay = 0.1
        while True:
            try:
                return self._db.connection()
            except Exception:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _commit(
        self,
        conn: Any,
        group: list[tuple[EventBatch, Future[None]]],
        *,
        reconnected: bool = False,
    ) -> None:
        started = time.perf_counter()
        dialect = self._db.dialect
        try:
            rows, ends = event_batches.group_writes(group)
            if not dialect.write_at_once(conn, rows, ends):
                with dialect.pipelined(conn):
                    dialect.begin_write(conn)
                    if rows:
                        dialect.insert_events(conn, rows)
                    for end in ends:
                        conn.execute(dialect.sql(end.sql), end.params)
                    conn.execute("COMMIT")
        except Exception as exc:
            if dialect.usable(conn) and dialect.in_transaction(conn):
                with contextlib.suppress(Exception):
                    conn.execute("ROLLBACK")
            try:
                if not dialect.usable(conn) and not reconnected:
                    # The database's end of the link went away (a restart, a failover): once
                    # more on a new connection. Had the COMMIT itself landed, the rows' primary
                    # keys refuse the second write, so nothing is ever written twice.
                    self._commit(self._connection(), group, reconnected=True)
                elif len(group) > 1:
                    for single in group:  # one bad batch must not fail the others
                        self._commit(self._connection(), [single], reconnected=True)
                else:
                    event_batches.failed(group, exc)
            except Exception as lost:  # no connection came back: fail, and keep the thread
                event_batches.failed(group, lost)
            return
        observe = self._db.on_event_commit
        if observe is not None:
            observe(time.perf_counter() - started)
        event_batches.committed(group)


def _resolve(future: Future[Any], fn: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn())
    except BaseException as exc:
        future.set_exception(exc)
