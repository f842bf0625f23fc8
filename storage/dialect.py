"""What differs between SQLite and PostgreSQL, in one object per database (`Dialect`), so that
no other module asks which database it is.

Statements are written once, as SQLite's driver takes them (`?` or `:name` parameters);
`Dialect.sql` gives the driver's own spelling. Each dialect also says how its engine and
plain connections are opened, how a write transaction starts, and what the event log's writer
can do at once (storage/thread_writer.py).
"""

from __future__ import annotations

import contextlib
import functools
import select
import sqlite3
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.exc import IntegrityError as OrmIntegrityError
from sqlmodel import create_engine

from storage import vector_extension
from storage.event_batches import event_inserts, events_at_once
from storage.private import private_dir, private_file
from storage.sql_text import LINK_TIMEOUTS, MAX_PARAMETERS, nul_safe, psycopg_style

# Any fixed number: the PostgreSQL advisory lock that makes replicas migrate one at a time.
MIGRATION_LOCK = 0x5548_5053  # "UHPS"
# A pooled PostgreSQL connection idle this long is pinged before use (_ping_when_idle); one
# the server is seen to have closed is replaced whatever its idle time.
IDLE_PING_SECONDS = 1.0


class Dialect(ABC):
    """One database's ways. `name` is SQLAlchemy's name for it."""

    name: str
    # Several replicas may share the database: leases, tails, cancels, the admission line
    # (engine/replicas/cluster.py), told each other through LISTEN/NOTIFY.
    shared: bool
    # Every write queues on the one writer, whatever its order (db.Order): SQLite allows one
    # writer at a time.
    one_writer: bool
    # A statement's WITH may hold INSERTs and UPDATEs, so that one statement writes several
    # tables atomically (storage/acceptance.py, the event log's group commits).
    writes_in_with: bool
    # The most parameters one statement carries.
    max_parameters: int
    # The libpq connection string a replica LISTENs on (None: nothing to listen to).
    conninfo: str | None = None
    # The database's own file (SQLite's; None: a server, or in memory).
    file: Path | None = None
    # SQL for the database's clock, in seconds since the epoch.
    now: str

    @abstractmethod
    def create_engine(self, url: URL, steady: int, most: int) -> Engine:
        """SQLAlchemy's engine, pooling `steady` connections and opening up to `most`."""

    @abstractmethod
    def autocommit(self, engine: Engine) -> Engine:
        """The engine for reads: each statement a transaction of its own."""

    @abstractmethod
    def migrating(self, connection: Connection) -> None:
        """Take what makes one migration at a time run, in the migration's transaction
        (storage/migrate.py)."""

    @abstractmethod
    def connect(self) -> Any:
        """A plain DB-API connection of its own, in autocommit (the event log's writer)."""

    @abstractmethod
    def begin_write(self, conn: Any) -> None: ...

    @abstractmethod
    def pipelined(self, conn: Any) -> AbstractContextManager[Any]:
        """Statements sent without waiting for each answer, where that saves round trips."""

    @abstractmethod
    def in_transaction(self, conn: Any) -> bool: ...

    @abstractmethod
    def usable(self, conn: Any) -> bool:
        """False once the database ended this connection (a restart, a terminated backend)."""

    @abstractmethod
    def sql(self, statement: str) -> str:
        """A statement written with `?` or `:name` parameters, as the driver spells them."""

    @abstractmethod
    def fetch(self, cursor: Any) -> list[tuple[Any, ...]]:
        """The rows of the statement the cursor ran ([] for one that returns none), once its
        answer has come (pipelined, it may not have yet)."""

    @abstractmethod
    def insert_events(self, conn: Any, rows: list[tuple[str, int, str]]) -> None: ...

    @abstractmethod
    def write_at_once(
        self, conn: Any, rows: list[tuple[str, int, str]], updates: list[Any]
    ) -> bool:
        """Write the event rows and the updates (event_batches.RowUpdate) as one statement,
        when this database can; False when it did not (then a transaction of statements does)."""

    @property
    @abstractmethod
    def integrity_error(self) -> tuple[type[Exception], ...]:
        """What the drivers raise for a broken primary key or constraint."""


_INSERT_EVENTS = "INSERT INTO event (response_id, seq, data) VALUES "


def sqlite_pragmas(dbapi_connection: Any, _record: Any = None) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers (stream replays) run beside the writer; NORMAL sync is durable across
    # process crashes, which is the failure we design for (not power loss mid-commit).
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
    # Recall by meaning's vector functions, where this Python's sqlite3 can load them.
    vector_extension.load(dbapi_connection)


class SQLiteDialect(Dialect):
    name = "sqlite"
    shared = False
    one_writer = True
    writes_in_with = False
    max_parameters = 32_766  # SQLITE_MAX_VARIABLE_NUMBER's default
    now = "((julianday('now') - 2440587.5) * 86400.0)"  # to the millisecond

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = Path(path) if path != ":memory:" else None

    def create_engine(self, url: URL, steady: int, most: int) -> Engine:
        if self.file is not None:
            private_dir(self.file.parent)
            private_file(self.file)  # and its WAL and shm files, which take its mode
            for companion in ("-wal", "-shm"):
                existing = self.file.with_name(self.file.name + companion)
                if existing.exists():
                    private_file(existing)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", sqlite_pragmas)
        return engine

    def autocommit(self, engine: Engine) -> Engine:
        return engine  # a read opens no transaction of sqlite3's own

    def migrating(self, connection: Connection) -> None:
        pass  # one process has the file (migrations write-lock it anyway)

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        sqlite_pragmas(conn)
        return conn

    def begin_write(self, conn: Any) -> None:
        # Take the write lock now, not at the first write: a reader's upgrade to writer
        # midway through a transaction is what fails with SQLITE_BUSY.
        conn.execute("BEGIN IMMEDIATE")

    def pipelined(self, conn: Any) -> AbstractContextManager[Any]:
        return contextlib.nullcontext()  # calls in process: nothing to save

    def in_transaction(self, conn: Any) -> bool:
        return bool(conn.in_transaction)

    def usable(self, conn: Any) -> bool:
        return True  # a file: nothing to lose

    def sql(self, statement: str) -> str:
        return statement

    def fetch(self, cursor: Any) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in cursor.fetchall()]  # [] for a statement without rows

    def insert_events(self, conn: Any, rows: list[tuple[str, int, str]]) -> None:
        conn.executemany(_INSERT_EVENTS + "(?, ?, ?)", rows)  # a loop in process

    def write_at_once(
        self, conn: Any, rows: list[tuple[str, int, str]], updates: list[Any]
    ) -> bool:
        return False  # a transaction's statements are calls in process: nothing to save

    integrity_error = (sqlite3.IntegrityError, OrmIntegrityError)


# Every PostgreSQL connection fails, rather than hangs, once the server stops answering: a
# dropped link (packets lost, no reset) would otherwise hold a statement for as long as TCP
# retries, minutes. Settings the deployment's URL gives win.


def link_timeouts(url: URL) -> dict[str, str]:
    """LINK_TIMEOUTS that the URL does not set itself."""
    return {key: value for key, value in LINK_TIMEOUTS.items() if key not in url.query}


class PostgresDialect(Dialect):
    name = "postgresql"
    shared = True
    one_writer = False
    writes_in_with = True
    max_parameters = MAX_PARAMETERS
    now = "EXTRACT(EPOCH FROM clock_timestamp())"

    def __init__(self, url: URL) -> None:
        url = url.set(drivername="postgresql").update_query_dict(link_timeouts(url))
        self.conninfo: str = url.render_as_string(hide_password=False)

    def create_engine(self, url: URL, steady: int, most: int) -> Engine:
        engine = create_engine(
            url, pool_size=steady, max_overflow=most - steady, connect_args=link_timeouts(url)
        )
        _ping_when_idle(engine)
        event.listen(engine, "connect", lambda conn, _record: nul_safe_text(conn))
        return engine

    def autocommit(self, engine: Engine) -> Engine:
        # One statement is a transaction of its own, and READ COMMITTED gives each statement
        # of a read its own snapshot anyway: reads run without BEGIN and ROLLBACK, two round
        # trips fewer each.
        return engine.execution_options(isolation_level="AUTOCOMMIT")

    def migrating(self, connection: Connection) -> None:
        # Several replicas may start at once on one database: each takes this lock for the
        # length of its migration transaction, so one migrates and the others, once they hold
        # it, find the database at head.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})

    def connect(self) -> Any:
        import psycopg  # only a PostgreSQL deployment needs the driver loaded

        conn = psycopg.connect(self.conninfo, autocommit=True)
        nul_safe_text(conn)
        return conn

    def begin_write(self, conn: Any) -> None:
        conn.execute("BEGIN")

    def pipelined(self, conn: Any) -> AbstractContextManager[Any]:
        """Statements sent without waiting for each answer: a transaction is one round trip
        instead of one per statement (an error surfaces when the block ends, or at the first
        read of a result)."""
        return conn.pipeline()

    def in_transaction(self, conn: Any) -> bool:
        import psycopg

        return bool(conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)

    def usable(self, conn: Any) -> bool:
        return not hung_up(conn)  # closed, or the server said it is closing it

    def sql(self, statement: str) -> str:
        return psycopg_style(statement)

    def fetch(self, cursor: Any) -> list[tuple[Any, ...]]:
        import psycopg

        if cursor.description is not None:
            return [tuple(row) for row in cursor.fetchall()]
        # No rows, or (pipelined) no answer yet: fetching waits for it, and says which.
        try:
            return [tuple(row) for row in cursor.fetchall()]
        except psycopg.ProgrammingError as exc:
            if exc.sqlstate is not None:
                raise  # the server's own error, which a pipeline reports here
            return []  # the statement returns no rows

    def write_at_once(
        self, conn: Any, rows: list[tuple[str, int, str]], updates: list[Any]
    ) -> bool:
        at_once = events_at_once(rows, updates)
        if at_once is None:
            return False
        if at_once[0]:
            conn.execute(*at_once)
        return True

    def insert_events(self, conn: Any, rows: list[tuple[str, int, str]]) -> None:
        """A statement per event_batches.EVENT_ROWS_PER_INSERT rows (a group is rarely more
        than one): `executemany` would send one per row, each parsed, executed and firing the
        NOTIFY trigger on its own; more rows than that would pass the protocol's 65,535
        parameters."""
        for sql, values in event_inserts(rows):
            conn.execute(sql, values)

    @property
    def integrity_error(self) -> tuple[type[Exception], ...]:
        import psycopg

        from storage.loop_link import IntegrityError  # the statements sent from the loop

        return (psycopg.IntegrityError, IntegrityError, OrmIntegrityError)


def dialect_for(url: URL) -> Dialect:
    if url.get_backend_name() == "sqlite":
        return SQLiteDialect(url.database or ":memory:")
    if url.get_backend_name() == "postgresql":
        return PostgresDialect(url)
    raise ValueError(f"unsupported database {url.get_backend_name()!r} (UHP_DATABASE_URL)")


def sqlalchemy_url(target: str) -> URL:
    """The URL SQLAlchemy opens: `postgresql://` means psycopg 3 (not psycopg2)."""
    url = make_url(target)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


# What `psycopg_style` rewrites: a quoted literal, a `::` cast, a `:name` parameter, a `?`
# parameter, a `%`.


def nul_safe_text(conn: Any) -> None:
    """Make this psycopg connection send NUL in text as U+FFFD. PostgreSQL's text cannot hold
    NUL, and psycopg refuses a statement carrying one (a 500, for a client who sent
    `/v1/sessions/%00` or an Oumi `invocation_id` holding one). No id the server makes holds
    NUL, so a lookup by one finds nothing, as on SQLite, and a client's text is kept with
    U+FFFD in its place. Every statement, ORM or plain, single or many, goes through it."""
    conn.adapters.register_dumper(str, _nul_safe_dumper())


@functools.cache
def _nul_safe_dumper() -> type:
    from psycopg.types.string import StrDumperUnknown

    class NulSafeStrDumper(StrDumperUnknown):  # psycopg's own text dumper, NUL aside
        def dump(self, obj: str) -> Any:
            return super().dump(nul_safe(obj))

    return NulSafeStrDumper


def hung_up(conn: Any) -> bool:
    """Whether the server ended this idle psycopg connection, found without a round trip: at
    rest the server never speaks on it, except to say it is closing it (a terminated backend,
    a restart, `idle_session_timeout`), so a readable socket means it is gone. (A connection
    that LISTENs is not at rest: this is for the others.)"""
    if conn.closed:
        return True
    # poll(), not select(): select() cannot watch a descriptor numbered past FD_SETSIZE (1024),
    # which a busy server's connections reach.
    watch = select.poll()
    try:
        watch.register(conn.fileno(), select.POLLIN)
    except (OSError, ValueError):
        return True
    return bool(watch.poll(0))


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
