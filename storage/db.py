"""The database: SQLite (one file under the data dir, WAL mode) or PostgreSQL, brought to
the current schema by its migrations on first use (storage/migrate.py).

One way in, a unit of work (storage/unit.py): `await db.read(fn, *args)` and
`await db.write(fn, *args)` run `fn(tx, *args)`, a storage function or a composition of
them, in one transaction on one connection; a write commits once when `fn` returns and writes
nothing when it raises. `db.run(fn, *args)` is the same on the calling thread, for the CLI,
start-up and scripts. Storage work stays off the event loop:

- Reads run on a pool of reader threads, each statement seeing what is committed (no BEGIN
  and ROLLBACK on PostgreSQL); a read whose connection the database ended is read again.
- Writes queue by their `Order`. By default on the one writer thread
  (storage/thread_writer.py), in order with every other write and with the event log's
  appends: SQLite allows one writer at a time, and funnelling every write through one thread
  means they queue in order instead of contending for the lock. On PostgreSQL, writes that
  need no place in that order run beside it, so that they never queue behind the event log's
  commits (bench/README.md measured why): the admission line's in an order of their own
  (`Order.LINE`), those whose conflicts the database decides on a pool (`Order.ANY`).
- `db.append_events` is the event log's own channel to the writer: whatever queued up while
  the previous commit ran goes into the next transaction (group commit), on PostgreSQL as a
  rule one statement (event_batches.events_at_once), on SQLite sqlite3's `executemany`.

On PostgreSQL, once the server's lifespan calls `bind_loop`, the statements every task makes
are sent from the event loop instead, through asyncpg: the reads and `Order.ANY` writes that
are one statement (unit.one_statement, unit.at_once: the principal's default harnesses, a
task's acceptance) and the event log's commits (storage/loop_link.py says why;
storage/loop_writer.py keeps the writer's order there). The callers do not see the difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from storage import migrate, tables  # noqa: F401  (registers the tables)
from storage.dialect import Dialect, dialect_for, sqlalchemy_url
from storage.event_batches import EventBatch
from storage.event_batches import SessionRelease as SessionRelease
from storage.sealing import Sealer
from storage.thread_writer import ThreadWriter
from storage.unit import OutcomeUnknown, Repeat, Statement, Tx, repeat_of, statement_of

if TYPE_CHECKING:
    from storage.loop_link import LoopLink
    from storage.loop_writer import LoopWriter

log = logging.getLogger(__name__)
T = TypeVar("T")
Ts = TypeVarTuple("Ts")

READ_THREADS = 4
SYNC_ROUTE_THREADS = 40  # FastAPI's (anyio's) default thread pool, where sync routes run
WRITE_THREADS = 4  # PostgreSQL's `Order.ANY` writes, beside the writer
# How long the writer waits for a database that went away (a restart, a failover) to answer
# again before failing what it was writing.
RECONNECT_SECONDS = 15.0
# The first pause before a repeatable write is sent once more (it doubles, up to 1 s).
REPEAT_PAUSE_SECONDS = 0.05
# PostgreSQL: each commit of events tells this channel which responses grew (a trigger on the
# event table, migration 0003); replicas tailing a response that runs elsewhere wake on it.
EVENTS_CHANNEL = "uhp_events"


class Order(Enum):
    """Where a write waits for its turn. SQLite has one writer: every write queues there, in
    order, whatever its Order.

    LOG: in order with every other LOG write and with the event log's appends, on the one
        writer (a response's row before its events, a session's release after them).
    LINE: in order with the admission line's writes (engine/replicas/shared_admission.py), on
        a thread of its own beside the writer, never behind the event log's commits; each
        transaction sent pipelined.
    ANY: no order at all, the database deciding its conflicts (a primary key, a conditional
        UPDATE): on a pool of threads beside the writer, where a transaction's round trips
        keep no other write waiting; one statement (unit.at_once) goes from the event loop
        while the server binds it.
    """

    LOG = "log"
    LINE = "line"
    ANY = "any"


class Database:
    def __init__(self, target: Path | str, sealer: Sealer | None = None) -> None:
        """`target`: a SQLite file, or a database URL (`sqlite:///…`, `postgresql://…`).
        `sealer`: what seals stored secrets (storage/sealing.py); without one, a storage
        function that stores or reads a secret fails."""
        self.sealer = sealer
        url = sqlalchemy_url(f"sqlite:///{target}" if isinstance(target, Path) else target)
        self.url = url
        self.dialect: Dialect = dialect_for(url)
        self.path = self.dialect.file
        # The pool grows to one connection for every thread that can hold one (the readers,
        # the writer, the admission line's, the ANY writes', and sync routes on FastAPI's
        # thread pool), instead of making any of them wait.
        self.engine: Engine = self.dialect.create_engine(
            url,
            steady=READ_THREADS + 2,
            most=READ_THREADS + WRITE_THREADS + 1 + SYNC_ROUTE_THREADS,
        )
        self._autocommit_engine = self.dialect.autocommit(self.engine)
        migrate.upgrade(self.engine, self.dialect)
        self._local = threading.local()
        self._connections: list[Any] = []
        self._lock = threading.Lock()
        self._readers: ThreadPoolExecutor | None = None
        self._writer: ThreadWriter | None = None
        # PostgreSQL, while the server's loop runs (bind_loop): its hot statements and the
        # event log's commits go from the loop.
        self._loop_link: LoopLink | None = None
        self._loop_writer: LoopWriter | None = None
        self._line: ThreadPoolExecutor | None = None
        self._any: ThreadPoolExecutor | None = None
        # Called on the writer thread with the seconds each event-log commit took (metrics).
        self.on_event_commit: Callable[[float], None] | None = None

    # -- the unit of work ------------------------------------------------------------------
    async def read(self, fn: Callable[[Tx, *Ts], T], *args: *Ts) -> T:
        """`fn(tx, *args)`, a read: on a reader thread (or one statement from the loop), read
        again once if the database had ended its connection."""
        link = self._loop_link
        if link is not None:
            statement = statement_of(fn, self.dialect, args)
            if statement is not None:
                return await self._from_the_loop(link, statement, repeatable=True)
        if self._readers is None:
            self._readers = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="db-read")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._read_here, fn, args)

    async def write(self, fn: Callable[[Tx, *Ts], T], *args: *Ts, order: Order = Order.LOG) -> T:
        """`fn(tx, *args)` in one transaction, committed when it returns, where `order` says
        (Order)."""
        if order is Order.LOG or self.dialect.one_writer:
            job = self._the_writer().submit(lambda: self._write_here(fn, args))
            return await asyncio.wrap_future(job)
        link = self._loop_link
        if order is Order.ANY and link is not None:
            statement = statement_of(fn, self.dialect, args)
            if statement is not None:
                # Not repeated on a lost link: its commit may have landed.
                return await self._from_the_loop(link, statement, repeatable=False)
        lane = self._line_lane() if order is Order.LINE else self._any_lane()
        loop = asyncio.get_running_loop()
        pipelined = order is Order.LINE
        return await loop.run_in_executor(lane, lambda: self._write_here(fn, args, pipelined))

    def run(self, fn: Callable[[Tx, *Ts], T], *args: *Ts) -> T:
        """`fn(tx, *args)` in one transaction on the calling thread, committed when it
        returns: for the CLI, start-up, scripts and synchronous routes."""
        return self._write_here(fn, args)

    def append_events(self, batch: EventBatch) -> Future[None]:
        """The event log's channel to the writer: queue event rows, committed in order with
        the LOG writes and grouped with whatever else queued meanwhile; the future resolves
        once they are committed."""
        return self._the_writer().append(batch)

    # -- how a unit runs, on the thread it was given ---------------------------------------
    def _read_here(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            return self._unit(self._autocommit_engine, fn, args, commit=False)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
        # The database had ended the connection (a restart, a terminated backend) in the
        # moment between the check at checkout and the statement: the pool has dropped the
        # dead connections since, and a read can always be repeated.
        return self._unit(self._autocommit_engine, fn, args, commit=False)

    def _write_here(
        self, fn: Callable[..., T], args: tuple[Any, ...], pipelined: bool = False
    ) -> T:
        statement = None if self.dialect.one_writer else statement_of(fn, self.dialect, args)
        if statement is not None:  # one statement in autocommit: no BEGIN and COMMIT
            return self._unit(self._autocommit_engine, statement.run, (), commit=False)
        policy = repeat_of(fn)
        if policy is None:
            return self._unit(self.engine, fn, args, commit=True, pipelined=pipelined)
        unit_id = secrets.token_hex(8)  # the same for every time it is sent

        def once() -> T:
            return self._unit(self.engine, fn, args, unit_id, commit=True, pipelined=pipelined)

        return _repeated(once, policy, args)

    def _unit(
        self,
        engine: Engine,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        unit_id: str = "",
        *,
        commit: bool,
        pipelined: bool = False,
    ) -> T:
        with engine.connect() as conn:
            # Begun before anything is sent: plain statements go to the driver directly, and
            # this is what commits (or, on leaving without a commit, rolls back) them.
            transaction = conn.begin()
            tx = Tx(conn, self.dialect, unit_id, self.sealer)
            try:
                with self.dialect.pipelined(tx.driver) if pipelined else contextlib.nullcontext():
                    result = fn(tx, *args)
                    if commit:
                        tx.flush()
                        transaction.commit()
            except Exception as exc:
                lost = _lost(conn, self.dialect, exc)
                if lost is exc:
                    raise
                raise lost from exc
            finally:
                tx.close()
        tx.committed()  # (a read's statements committed as they ran)
        return result

    async def _from_the_loop(
        self, link: LoopLink, statement: Statement[T], *, repeatable: bool
    ) -> T:
        sql = self.dialect.sql(statement.sql)
        return statement.result(await link.fetch(sql, statement.params, repeatable=repeatable))

    # -- lanes and writers ------------------------------------------------------------------
    def _line_lane(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._line is None:
                self._line = ThreadPoolExecutor(1, thread_name_prefix="db-write-line")
            return self._line

    def _any_lane(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._any is None:
                self._any = ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="db-write-any")
            return self._any

    def _the_writer(self) -> ThreadWriter | LoopWriter:
        if self._loop_writer is not None:
            return self._loop_writer
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    self._writer = ThreadWriter(self, RECONNECT_SECONDS)
        return self._writer

    def connection(self) -> Any:
        """The event log writer's own plain DB-API connection, in autocommit mode, kept for
        the thread's life (storage/thread_writer.py writes without the ORM)."""
        conn: Any = getattr(self._local, "conn", None)
        if conn is None or not self.dialect.usable(conn):
            conn = self.dialect.connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @property
    def writer_alive(self) -> bool:
        """False once the writer died: nothing written would ever commit."""
        writer = self._loop_writer or self._writer
        return writer is None or writer.alive

    async def bind_loop(self) -> None:
        """PostgreSQL: from now until `unbind_loop`, send the one-statement reads and ANY
        writes and the event log's commits from the running loop, through asyncpg
        (storage/loop_link.py says why). The server's lifespan calls it; without it (the CLI,
        scripts) everything runs on threads. SQLite: nothing to do."""
        if not self.dialect.shared or self._loop_link is not None:
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

    def close(self) -> None:
        if self._writer is not None:
            self._writer.stop()
            self._writer = None
        for pool in (self._readers, self._line, self._any):
            if pool is not None:
                pool.shutdown(wait=True)
        self._readers = self._line = self._any = None
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
        self.engine.dispose()


def _lost(conn: Connection, dialect: Dialect, error: Exception) -> Exception:
    """What a unit's failure raises: the error itself, or, when the database ended the
    connection under it (a restart, a terminated backend), an error saying so as the ORM's
    would (`connection_invalidated`), with the connection dropped from the pool."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return error
    driver = conn.connection.dbapi_connection if not conn.invalidated else None
    if driver is None or dialect.usable(driver):
        return error
    conn.invalidate(error)
    return DBAPIError(None, None, error, connection_invalidated=True)


def _repeated(once: Callable[[], T], policy: Repeat, args: tuple[Any, ...]) -> T:
    """`once()`, sent again while its outcome is unknown (unit.repeatable): at once after the
    first connection the database ended under it, then, for `policy.seconds`, with a growing
    pause until the database answers. An error that is not a lost connection, before any
    was lost, is raised as it is: nothing of it landed."""
    deadline = None if policy.seconds is None else time.monotonic() + policy.seconds(*args)
    pause = REPEAT_PAUSE_SECONDS
    unknown = False
    while True:
        try:
            return once()
        except Exception as exc:
            lost = isinstance(exc, DBAPIError) and exc.connection_invalidated
            if not (lost or unknown):
                raise  # refused, or never sent
            if unknown:
                left = 0.0 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise OutcomeUnknown(str(exc)) from exc
                time.sleep(min(pause, left))
                pause = min(pause * 2, 1.0)
            unknown = True
