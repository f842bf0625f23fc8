"""The SQLite database: one file under the data dir, WAL mode, created on first use.

Storage work stays off the event loop. Async callers use `await db.read(fn, …)`, which runs
`fn` on a pool of reader threads (each with its own connections), and `await db.write(fn, …)`,
which runs `fn` on the one writer thread: SQLite allows one writer at a time, and funnelling
every write through one thread means they queue in order instead of contending for the lock.
The event log's appends (`db.append_events`) ride the same thread and are group-committed:
whatever queued up while the previous commit ran goes into the next transaction.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, create_engine

from storage import mcp_secrets, models, skills  # noqa: F401  (registers the tables)

P = ParamSpec("P")
T = TypeVar("T")

READ_THREADS = 4


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers (stream replays) run beside the writer; NORMAL sync is durable across
    # process crashes, which is the failure we design for (not power loss mid-commit).
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


@dataclass
class EventBatch:
    """Rows for the event log, written in one transaction with whatever else is queued."""

    response_id: str
    rows: list[tuple[int, str]]  # (seq, the event as JSON)
    final: str | None = None  # the terminal response object as JSON, when the log ends here
    status: str | None = None


class Database:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.engine: Engine = create_engine(
            f"sqlite:///{path}", connect_args={"check_same_thread": False}
        )
        event.listen(self.engine, "connect", _sqlite_pragmas)
        SQLModel.metadata.create_all(self.engine)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._readers: ThreadPoolExecutor | None = None
        self._writer: _Writer | None = None
        # Called on the writer thread with the seconds each event-log commit took (metrics).
        self.on_event_commit: Callable[[float], None] | None = None

    # -- synchronous access (threads, the CLI, start-up) -----------------------------------
    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def connection(self) -> sqlite3.Connection:
        """This thread's plain sqlite3 connection (for the event log's raw SQL: the ORM costs
        about a millisecond per row, this tens of microseconds)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            _sqlite_pragmas(conn, None)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    # -- asynchronous access (the event loop) ----------------------------------------------
    async def read(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a read on a reader thread."""
        if self._readers is None:
            self._readers = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="db-read")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: fn(*args, **kwargs))

    async def write(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a write on the writer thread, in order with every other write."""
        return await asyncio.wrap_future(self._the_writer().submit(lambda: fn(*args, **kwargs)))

    def append_events(self, batch: EventBatch) -> Future[None]:
        """Queue event rows; the future resolves once they are committed."""
        return self._the_writer().append(batch)

    def _the_writer(self) -> _Writer:
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    self._writer = _Writer(self)
        return self._writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.stop()
            self._writer = None
        if self._readers is not None:
            self._readers.shutdown(wait=True)
            self._readers = None
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
        self.engine.dispose()


_STOP = object()


class _Writer:
    """The one thread that writes. Jobs run in the order they were queued; consecutive event
    batches share one `BEGIN IMMEDIATE` transaction (group commit)."""

    def __init__(self, db: Database) -> None:
        self._db = db
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
        conn = self._db.connection()
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
            self._commit(conn, group)

    def _commit(
        self, conn: sqlite3.Connection, group: list[tuple[EventBatch, Future[None]]]
    ) -> None:
        started = time.perf_counter()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for batch, _ in group:
                _write_batch(conn, batch)
            conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if len(group) > 1:
                for single in group:  # one bad batch must not fail the others
                    self._commit(conn, [single])
            elif group[0][1].set_running_or_notify_cancel():
                group[0][1].set_exception(exc)
            return
        observe = self._db.on_event_commit
        if observe is not None:
            observe(time.perf_counter() - started)
        for _, future in group:
            if future.set_running_or_notify_cancel():
                future.set_result(None)


def _write_batch(conn: sqlite3.Connection, batch: EventBatch) -> None:
    conn.executemany(
        "INSERT INTO event (response_id, seq, data) VALUES (?, ?, ?)",
        [(batch.response_id, seq, data) for seq, data in batch.rows],
    )
    if batch.final is not None:
        conn.execute(
            "UPDATE response SET status = ?, final = ?, finished_at = ? WHERE id = ?",
            (batch.status, batch.final, time.time(), batch.response_id),
        )


def _resolve(future: Future[Any], fn: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn())
    except BaseException as exc:
        future.set_exception(exc)
