"""Plain DB-API connections for the event log's hot path, one kind per database.

The ORM costs about a millisecond per row; the driver's own `executemany` tens of
microseconds. Each backend says how to open a connection, how to start a write transaction
and how its driver spells a parameter; the SQL itself is written once, with `?`.
"""

from __future__ import annotations

import contextlib
import functools
import select
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.engine import URL, make_url


@dataclass(frozen=True)
class RowUpdate:
    """A statement (with `?` parameters) that changes the one row `row` names."""

    sql: str
    params: tuple[Any, ...]
    row: tuple[str, str]  # (table, primary key)


class RawBackend(Protocol):
    """What the writer and the event readers need from a database's own driver."""

    def connect(self) -> Any: ...

    def begin_write(self, conn: Any) -> None: ...

    def pipelined(self, conn: Any) -> AbstractContextManager[Any]: ...

    def in_transaction(self, conn: Any) -> bool: ...

    def usable(self, conn: Any) -> bool: ...

    def sql(self, statement: str) -> str: ...

    def insert_events(self, conn: Any, rows: list[tuple[str, int, str]]) -> None: ...

    def write_at_once(
        self, conn: Any, rows: list[tuple[str, int, str]], updates: list[RowUpdate]
    ) -> bool:
        """Write the event rows and the updates as one statement, when this database can;
        False when it did not (then a transaction of statements does)."""
        ...

    @property
    def now(self) -> str:
        """SQL for the database's clock, in seconds since the epoch."""
        ...

    @property
    def integrity_error(self) -> tuple[type[Exception], ...]:
        """What the drivers raise for a broken primary key or constraint."""
        ...


_INSERT_EVENTS = "INSERT INTO event (response_id, seq, data) VALUES "
# Rows in one multi-row INSERT of events on PostgreSQL (three parameters each).
EVENT_ROWS_PER_INSERT = 1000
MAX_PARAMETERS = 65_535  # in one PostgreSQL statement (the protocol's limit)


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


def nul_safe(text: str) -> str:
    """Text PostgreSQL can hold: NUL as U+FFFD (both drivers' parameters go through it)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def sqlite_pragmas(dbapi_connection: Any, _record: Any = None) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers (stream replays) run beside the writer; NORMAL sync is durable across
    # process crashes, which is the failure we design for (not power loss mid-commit).
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


class SQLiteBackend:
    def __init__(self, path: str) -> None:
        self.path = path

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

    def insert_events(self, conn: Any, rows: list[tuple[str, int, str]]) -> None:
        conn.executemany(_INSERT_EVENTS + "(?, ?, ?)", rows)  # a loop in process

    def write_at_once(
        self, conn: Any, rows: list[tuple[str, int, str]], updates: list[RowUpdate]
    ) -> bool:
        return False  # a transaction's statements are calls in process: nothing to save

    now = "((julianday('now') - 2440587.5) * 86400.0)"  # to the millisecond
    integrity_error = (sqlite3.IntegrityError,)


# Every PostgreSQL connection fails, rather than hangs, once the server stops answering: a
# dropped link (packets lost, no reset) would otherwise hold a statement for as long as TCP
# retries, minutes. Settings the deployment's URL gives win.
LINK_TIMEOUTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",  # milliseconds a sent byte may stay unacknowledged
}


def link_timeouts(url: URL) -> dict[str, str]:
    """LINK_TIMEOUTS that the URL does not set itself."""
    return {key: value for key, value in LINK_TIMEOUTS.items() if key not in url.query}


class PostgresBackend:
    def __init__(self, url: URL) -> None:
        url = url.set(drivername="postgresql").update_query_dict(link_timeouts(url))
        self.conninfo = url.render_as_string(hide_password=False)

    def connect(self) -> Any:
        import psycopg  # only a PostgreSQL deployment needs the driver loaded

        conn = psycopg.connect(self.conninfo, autocommit=True)
        nul_safe_text(conn)
        return conn

    def begin_write(self, conn: Any) -> None:
        conn.execute("BEGIN")

    def pipelined(self, conn: Any) -> AbstractContextManager[Any]:
        """Statements sent without waiting for each answer: a transaction of events is one
        round trip instead of one per statement (an error surfaces when the block ends)."""
        return conn.pipeline()

    def in_transaction(self, conn: Any) -> bool:
        import psycopg

        return bool(conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)

    def usable(self, conn: Any) -> bool:
        return not hung_up(conn)  # closed, or the server said it is closing it

    def sql(self, statement: str) -> str:
        return psycopg_style(statement)

    def write_at_once(
        self, conn: Any, rows: list[tuple[str, int, str]], updates: list[RowUpdate]
    ) -> bool:
        at_once = events_at_once(rows, updates)
        if at_once is None:
            return False
        if at_once[0]:
            conn.execute(*at_once)
        return True

    def insert_events(self, conn: Any, rows: list[tuple[str, int, str]]) -> None:
        """A statement per EVENT_ROWS_PER_INSERT rows (a group is rarely more than one):
        `executemany` would send one per row, each parsed, executed and firing the NOTIFY
        trigger on its own; more rows than that would pass the protocol's 65,535 parameters."""
        for sql, values in event_inserts(rows):
            conn.execute(sql, values)

    now = "EXTRACT(EPOCH FROM clock_timestamp())"

    @property
    def integrity_error(self) -> tuple[type[Exception], ...]:
        import psycopg

        from storage.loop_link import IntegrityError  # the statements sent from the loop

        return (psycopg.IntegrityError, IntegrityError)


def events_at_once(
    rows: list[tuple[str, int, str]], updates: list[RowUpdate]
) -> tuple[str, list[Any]] | None:
    """PostgreSQL: the event rows and the updates as one statement of data-modifying CTEs,
    atomic on its own in autocommit: one round trip and one answer, where BEGIN, the
    statements and COMMIT are a pipeline whose machinery costs several times one statement's
    (an empty statement: nothing to write). None when it cannot be one: two updates change
    one row (a statement's CTEs all see the same snapshot, and which of the two wins is
    undefined), or more parameters than the protocol allows in one statement."""
    if len({update.row for update in updates}) < len(updates):
        return None
    if 3 * len(rows) + sum(len(update.params) for update in updates) > MAX_PARAMETERS:
        return None
    parts, params = [], []
    for n, (sql, values) in enumerate(event_inserts(rows)):
        parts.append(f"e{n} AS ({sql})")
        params.extend(values)
    for n, update in enumerate(updates):
        parts.append(f"u{n} AS ({psycopg_style(update.sql)})")
        params.extend(update.params)
    if not parts:
        return "", []
    return "WITH " + ", ".join(parts) + " SELECT 1", params


def psycopg_style(statement: str) -> str:
    """A statement written with `?` parameters, in psycopg's `%s`."""
    return statement.replace("?", "%s")


def event_inserts(rows: list[tuple[str, int, str]]) -> Iterator[tuple[str, list[Any]]]:
    """PostgreSQL's multi-row INSERTs of events, EVENT_ROWS_PER_INSERT rows each."""
    for start in range(0, len(rows), EVENT_ROWS_PER_INSERT):
        chunk = rows[start : start + EVENT_ROWS_PER_INSERT]
        values = ", ".join(["(%s, %s, %s)"] * len(chunk))
        yield _INSERT_EVENTS + values, [field for row in chunk for field in row]


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


def sqlalchemy_url(target: str) -> URL:
    """The URL SQLAlchemy opens: `postgresql://` means psycopg 3 (not psycopg2)."""
    url = make_url(target)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


def backend_for(url: URL) -> RawBackend:
    if url.get_backend_name() == "sqlite":
        return SQLiteBackend(url.database or ":memory:")
    if url.get_backend_name() == "postgresql":
        return PostgresBackend(url)
    raise ValueError(f"unsupported database {url.get_backend_name()!r} (UHP_DATABASE_URL)")
