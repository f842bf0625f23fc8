"""The database: SQLite (one file under the data dir, WAL mode) or PostgreSQL, brought to
the current schema by its migrations on first use (storage/migrate.py).

Storage work stays off the event loop. Async callers use `await db.read(fn, …)`, which runs
`fn` on a pool of reader threads (each with its own connections), and `await db.write(fn, …)`,
which runs `fn` on the one writer thread (storage/thread_writer.py): SQLite allows one writer
at a time, and funnelling every write through one thread means they queue in order instead of
contending for the lock.
The event log's appends (`db.append_events`) ride the same thread and are group-committed:
whatever queued up while the previous commit ran goes into the next transaction. PostgreSQL
takes the same path (one writer keeps each response's events in exact order for free); its
group commit is as a rule one statement (raw_sql.events_at_once), SQLite's sqlite3's
`executemany` in a transaction.

On PostgreSQL, once the server's lifespan calls `bind_loop`, the statements every task makes
(`select`, `write_statement`, the event log's commits) are sent from the event loop instead,
through asyncpg (storage/loop_link.py says why; storage/loop_writer.py keeps the writer's
order there).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlmodel import Session, create_engine

from storage import mcp_secrets, migrate, models, skills  # noqa: F401  (registers the tables)
from storage.event_batches import EventBatch
from storage.event_batches import SessionRelease as SessionRelease
from storage.raw_sql import (
    backend_for,
    hung_up,
    link_timeouts,
    nul_safe_text,
    sqlalchemy_url,
    sqlite_pragmas,
)
from storage.thread_writer import ThreadWriter

if TYPE_CHECKING:
    from storage.loop_link import LoopLink
    from storage.loop_writer import LoopWriter

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

READ_THREADS = 4
SYNC_ROUTE_THREADS = 40  # FastAPI's (anyio's) default thread pool, where sync routes run
WRITE_THREADS = 4  # PostgreSQL's writes beside the writer (`write_beside`)
# How long the writer waits for a database that went away (a restart, a failover) to answer
# again before failing what it was writing.
RECONNECT_SECONDS = 15.0
# A pooled PostgreSQL connection idle this long is pinged before use (_ping_when_idle); one
# the server is seen to have closed is replaced whatever its idle time.
IDLE_PING_SECONDS = 1.0
# PostgreSQL: each commit of events tells this channel which responses grew (a trigger on the
# event table, migration 0003); replicas tailing a response that runs elsewhere wake on it.
EVENTS_CHANNEL = "uhp_events"


class Database:
    def __init__(self, target: Path | str) -> None:
        """`target`: a SQLite file, or a database URL (`sqlite:///…`, `postgresql://…`)."""
        url = sqlalchemy_url(f"sqlite:///{target}" if isinstance(target, Path) else target)
        self.dialect = url.get_backend_name()
        self.url = url
        self.path = Path(url.database) if self.dialect == "sqlite" and url.database else None
        self.raw = backend_for(url)
        if self.dialect == "sqlite":
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = create_engine(url, connect_args={"check_same_thread": False})
            event.listen(self.engine, "connect", sqlite_pragmas)
        else:
            # Sync routes run on FastAPI's thread pool beside the readers and the writes beside
            # the writer: the pool grows to one connection for every thread that can hold one,
            # instead of making any of them wait.
            steady = READ_THREADS + 2
            most = READ_THREADS + WRITE_THREADS + 1 + SYNC_ROUTE_THREADS  # 1: `write_single`
            self.engine = create_engine(
                url,
                pool_size=steady,
                max_overflow=most - steady,
                connect_args=link_timeouts(url),
            )
            _ping_when_idle(self.engine)
            event.listen(self.engine, "connect", lambda conn, _record: nul_safe_text(conn))
        # One statement is a transaction of its own, and PostgreSQL's READ COMMITTED gives each
        # statement of a read its own snapshot anyway: reads and lone statements run without
        # BEGIN and COMMIT/ROLLBACK, two round trips fewer each (SQLite's are calls in process).
        self._autocommit_engine = (
            self.engine
            if self.dialect == "sqlite"
            else self.engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        migrate.upgrade(self.engine)
        self._local = threading.local()
        self._connections: list[Any] = []
        self._lock = threading.Lock()
        self._readers: ThreadPoolExecutor | None = None
        self._writer: ThreadWriter | None = None
        # PostgreSQL, while the server's loop runs (bind_loop): its hot statements and the
        # event log's commits go from the loop.
        self._loop_link: LoopLink | None = None
        self._loop_writer: LoopWriter | None = None
        self._apart: ThreadPoolExecutor | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._single: ThreadPoolExecutor | None = None
        # Called on the writer thread with the seconds each event-log commit took (metrics).
        self.on_event_commit: Callable[[float], None] | None = None

    # -- synchronous access (threads, the CLI, start-up) -----------------------------------
    @contextmanager
    def session(self, *, autocommit: bool = False) -> Iterator[Session]:
        """A session on this thread; on a reader thread (`read`), or with `autocommit`, each
        statement commits on its own."""
        reading = autocommit or getattr(self._local, "reader", False)
        engine = self._autocommit_engine if reading else self.engine
        with Session(engine, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def plain_connection(self) -> Iterator[Any]:
        """A pooled DB-API connection for a few plain statements (reads of the event log,
        storage/raw_sql.py's SQL through `self.raw.sql(…)`), in autocommit; back to the pool
        after, so no thread keeps one."""
        with self._autocommit_engine.connect() as conn:
            plain = conn.connection.dbapi_connection
            try:
                yield plain
            except Exception as exc:
                if self.raw.usable(plain):
                    raise
                # The database ended the link (a restart, a terminated backend): the pool drops
                # it, and the error says so as the ORM's would, so that a read is repeated
                # (`_again_if_disconnected`).
                conn.invalidate(exc)
                raise DBAPIError(None, None, exc, connection_invalidated=True) from exc

    def connection(self) -> Any:
        """This thread's own plain DB-API connection, in autocommit mode, kept for the thread's
        life: for the threads that write without the ORM (the event log's writer, the
        admission line's), never for others (`plain_connection`)."""
        conn: Any = getattr(self._local, "conn", None)
        if conn is None or not self.raw.usable(conn):
            conn = self.raw.connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    # -- asynchronous access (the event loop) ----------------------------------------------
    async def read(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a read on a reader thread."""
        if self._readers is None:
            self._readers = ThreadPoolExecutor(
                READ_THREADS, thread_name_prefix="db-read", initializer=self._mark_reader
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._readers, lambda: _again_if_disconnected(lambda: fn(*args, **kwargs))
        )

    def _mark_reader(self) -> None:
        self._local.reader = True

    async def write(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a write on the writer thread, in order with every other write."""
        return await asyncio.wrap_future(self._the_writer().submit(lambda: fn(*args, **kwargs)))

    async def write_apart(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a write that needs no order with the event log's (the admission line's) on a
        writer thread of its own, in order with every other such write: it runs beside the
        event log's commits instead of queuing behind them. SQLite has one writer: `write`."""
        return await self._beside(self._apart_lane, fn, *args, **kwargs)

    async def write_beside(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a write whose conflicts the database decides (a primary key, a conditional
        UPDATE), so it needs no place in any order: on one of a pool of threads beside the
        writer, where a transaction's round trips keep no other write waiting. SQLite has one
        writer: `write`."""
        return await self._beside(self._pool_lane, fn, *args, **kwargs)

    async def write_single(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a write that is as a rule a single statement on PostgreSQL (a task's acceptance,
        at every task), whose conflicts the database decides: on one thread of its own beside
        the writer. One: each thread more only contends for the GIL (four measured 231 tasks/s,
        two 227, one 263: bench/README.md). SQLite has one writer: `write`."""
        return await self._beside(self._single_lane, fn, *args, **kwargs)

    async def select(self, statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of one read (`statement` as `self.raw.sql` writes it): sent from the loop
        on PostgreSQL once bound (storage/loop_link.py), on a reader thread otherwise."""
        if self._loop_link is not None:
            return await self._loop_link.fetch(statement, params, repeatable=True)
        return await self.read(self._fetch_here, statement, params)

    async def write_statement(
        self, statement: str, params: list[Any] | tuple[Any, ...]
    ) -> list[tuple[Any, ...]]:
        """One PostgreSQL statement that writes, a transaction of its own, whose conflicts the
        database decides (a task's acceptance); its rows. Sent from the loop once bound, on
        `write_single`'s thread otherwise. Not repeated on a lost link: its commit may have
        landed."""
        assert self.dialect == "postgresql", "SQLite's writes queue on the writer: write()"
        if self._loop_link is not None:
            return await self._loop_link.fetch(statement, params, repeatable=False)
        return await self.write_single(self._fetch_here, statement, params)

    def _fetch_here(
        self, statement: str, params: list[Any] | tuple[Any, ...]
    ) -> list[tuple[Any, ...]]:
        with self.plain_connection() as conn:
            return [tuple(row) for row in conn.execute(statement, params).fetchall()]

    async def bind_loop(self) -> None:
        """PostgreSQL: from now until `unbind_loop`, send the hot statements (`select`,
        `write_statement`) and the event log's commits from the running loop, through asyncpg
        (storage/loop_link.py says why). The server's lifespan calls it; without it (the CLI,
        scripts) everything runs on threads. SQLite: nothing to do."""
        if self.dialect != "postgresql" or self._loop_link is not None:
            return
        from storage.loop_link import LoopLink, UnsupportedUrl
        from storage.loop_writer import LoopWriter

        try:
            link = LoopLink(self.url)
        except UnsupportedUrl as why:
            log.warning("PostgreSQL's statements stay on threads: %s (UHP_DATABASE_URL)", why)
            return
        await link.open()
        # Whatever the thread writer holds is written before anything queued from now on.
        thread_writer, self._writer = self._writer, None
        self._loop_link = link
        self._loop_writer = LoopWriter(
            self,
            link,
            asyncio.get_running_loop(),
            RECONNECT_SECONDS,
            after=thread_writer.stop if thread_writer is not None else None,
        )

    async def unbind_loop(self) -> None:
        """Write what is queued, then close the loop's connections."""
        writer, self._loop_writer = self._loop_writer, None
        link, self._loop_link = self._loop_link, None
        try:
            if writer is not None:
                await writer.stop()
        finally:
            if link is not None:
                await link.close()

    async def _beside(
        self, lane: Callable[[], ThreadPoolExecutor], fn: Callable[P, T], *args: Any, **kwargs: Any
    ) -> T:
        if self.dialect == "sqlite":
            return await self.write(fn, *args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(lane(), lambda: fn(*args, **kwargs))

    def _apart_lane(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._apart is None:
                self._apart = ThreadPoolExecutor(1, thread_name_prefix="db-write-apart")
            return self._apart

    def _single_lane(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._single is None:
                self._single = ThreadPoolExecutor(1, thread_name_prefix="db-write-single")
            return self._single

    def _pool_lane(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="db-write-pool")
            return self._pool

    def append_events(self, batch: EventBatch) -> Future[None]:
        """Queue event rows; the future resolves once they are committed."""
        return self._the_writer().append(batch)

    def _the_writer(self) -> ThreadWriter | LoopWriter:
        if self._loop_writer is not None:
            return self._loop_writer
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    self._writer = ThreadWriter(self, RECONNECT_SECONDS)
        return self._writer

    @property
    def writer_alive(self) -> bool:
        """False once the writer died: nothing written would ever commit."""
        writer = self._loop_writer or self._writer
        return writer is None or writer.alive

    def close(self) -> None:
        if self._writer is not None:
            self._writer.stop()
            self._writer = None
        for pool in (self._readers, self._apart, self._pool, self._single):
            if pool is not None:
                pool.shutdown(wait=True)
        self._readers = self._apart = self._pool = self._single = None
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
        self.engine.dispose()


def run_statement(db: Database, statement: str, *, notify: str | None = None, **params: Any) -> Any:
    """One statement, a transaction of its own (rows, or the count of rows changed). With
    `notify` (PostgreSQL; `statement` an UPDATE), the channel is told the id of every row it
    changed when it commits."""
    if notify is not None:
        statement = (
            f"WITH changed AS ({statement} RETURNING id)"
            " SELECT pg_notify(:channel, id) FROM changed"
        )
        params["channel"] = notify
    with db.session(autocommit=True) as s:
        result = s.connection().execute(text(statement), params)
        if notify is not None:
            return len(result.all())
        rows = result.all() if result.returns_rows else result.rowcount
        s.commit()  # SQLite's: PostgreSQL's statement committed as it ran
        return rows


def _again_if_disconnected(read: Callable[[], T]) -> T:
    """A read, once more if the database had ended its connection (a restart, a terminated
    backend) in the moment between the check at checkout and the statement: the pool has then
    dropped the dead connections, and a read can always be repeated."""
    try:
        return read()
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
    return read()


def _ping_when_idle(engine: Engine) -> None:
    """Check a pooled connection before use: replaced at once when the server is seen to have
    closed it (no round trip), pinged when it sat idle a while (a link dropped without a word
    says nothing), while pinging at every checkout would cost a round trip per use."""

    @event.listens_for(engine, "checkin")
    def _idle_from_now(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if hung_up(dbapi_conn):
            raise DisconnectionError("the server closed the connection")
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < IDLE_PING_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:  # the pool replaces the connection and tries again
            raise DisconnectionError() from exc
