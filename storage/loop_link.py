"""PostgreSQL's hot statements, sent from the event loop.

A task's acceptance, its event-log commits and the read of its principal's default harnesses
are one statement each (the storage functions declared `unit.one_statement` / `unit.at_once`,
and the event log's group commits). Sent from a thread through psycopg, each costs two thread
hand-offs and psycopg's Python on both sides of the round trip, and the thread then waits for
the busy loop to let go of the GIL (bench/README.md measured all of it, and measured again,
with real CLI turns, what it is worth: bench/postgres_paths.py). asyncpg sends them from the
loop itself: its protocol is compiled, and its sockets are watched by the loop like any
client's, so nothing blocks and no thread takes part. storage/db.py decides what goes here:
its callers use the same `db.read` and `db.write` either way. Everything else (the ORM's reads
and writes, the admission line, migrations) stays on the threads of storage/db.py. SQLite has
no such link: its calls block, so they stay on threads.

The statements are written as for psycopg (`%s`, `%s::json`); `numbered` turns them into
asyncpg's `$n`, typed from the values, since asyncpg sends parameters typed and PostgreSQL
cannot always infer them (a VALUES list types an untyped parameter as text).
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Sequence
from typing import Any

import asyncpg
from sqlalchemy.engine import URL

from storage.sql_text import LINK_TIMEOUTS, nul_safe

# Connections the loop keeps for acceptances and reads; more simultaneous statements wait for
# one (each is a single round trip). The event log's writer holds one more of its own.
POOL_SIZE = 4
_PARAMETER = re.compile(r"%(s|%)(::json)?")
# The URL's options asyncpg takes as libpq does (it sends `options` and `application_name`,
# like anything else it does not know, as startup settings: for those two, as libpq does).
_ASYNCPG_OPTIONS = {
    *("host", "port", "user", "password", "dbname", "database", "passfile", "sslmode"),
    *("sslcert", "sslkey", "sslrootcert", "sslcrl", "sslpassword"),
    *("ssl_min_protocol_version", "ssl_max_protocol_version", "target_session_attrs"),
    *("krbsrvname", "gsslib", "application_name", "options"),
}
# Lost links: the statement failed without an answer (a write's commit may have landed).
Disconnected = (
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InternalClientError,  # a connection whose link broke mid-statement
    ConnectionError,
    OSError,
)
# The server's own word that it ended the session (pg_terminate_backend, a shutdown, its idle
# timeout): a statement it answered so was never committed, and can be sent again.
_SESSION_ENDED = (
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.IdleSessionTimeoutError,
)
IntegrityError = asyncpg.exceptions.IntegrityConstraintViolationError


class UnsupportedUrl(ValueError):
    """The database URL has an option asyncpg cannot honour: the server keeps its threads."""


def connect_arguments(url: URL) -> dict[str, Any]:
    """asyncpg's arguments for the server's database URL. The link options (storage/dialect's
    LINK_TIMEOUTS) are the sockets' own (`link_settings`), the connect timeout becomes
    asyncpg's. An option asyncpg does not take as libpq does (`channel_binding`, `hostaddr`,
    a `service`, whose dbname asyncpg would not read, …) or one given twice (libpq tries each
    `host=` in turn, asyncpg would keep the last) raises UnsupportedUrl, rather than be
    dropped or sent as a server setting."""
    query = dict(url.query)
    unknown = sorted(set(query) - _ASYNCPG_OPTIONS - set(LINK_TIMEOUTS))
    if unknown:
        raise UnsupportedUrl(f"asyncpg cannot honour {', '.join(unknown)}")
    repeated = sorted(key for key, value in query.items() if not isinstance(value, str))
    if repeated:
        raise UnsupportedUrl(f"asyncpg cannot honour {', '.join(repeated)} given twice")
    kept = {key: value for key, value in query.items() if key in _ASYNCPG_OPTIONS}
    dsn = url.set(drivername="postgresql", query=kept).render_as_string(hide_password=False)
    timeout = float(str(query.get("connect_timeout", LINK_TIMEOUTS["connect_timeout"])))
    return {"dsn": dsn, "timeout": timeout}


def link_settings(url: URL) -> dict[str, int]:
    """The keepalive and unacknowledged-data timeouts libpq would give the URL's connections
    (LINK_TIMEOUTS, unless the URL sets them): a link that drops without a word fails a
    statement instead of hanging it."""
    query = {**LINK_TIMEOUTS, **dict(url.query)}
    return {key: int(str(query[key])) for key in LINK_TIMEOUTS if key != "connect_timeout"}


def apply_link_settings(conn: asyncpg.Connection, settings: dict[str, int]) -> None:
    """Give an asyncpg connection's TCP socket `link_settings`, as libpq gives its own. asyncpg
    has no option for them: the socket is its transport's (a private attribute, so
    tests/test_postgres_storage.py checks that the options land)."""
    sock = conn._transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # a Unix socket has no TCP to time out
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, settings["tcp_user_timeout"])
    if not settings["keepalives"]:  # libpq's keepalives=0: the user timeout still holds
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, settings["keepalives_idle"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, settings["keepalives_interval"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, settings["keepalives_count"])


def numbered(statement: str, params: Sequence[Any]) -> tuple[str, list[Any]]:
    """A psycopg-style statement as asyncpg's: `%s` → `$n` with a cast from the value's type
    (`%s::json` keeps its own), `%%` → `%`, and NUL in text as U+FFFD (PostgreSQL's text
    cannot hold NUL: dialect.nul_safe, as for psycopg)."""
    values = [nul_safe(value) if isinstance(value, str) else value for value in params]
    position = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal position
        if match.group(1) == "%":
            return "%"
        position += 1
        if position > len(values):
            raise ValueError(f"more parameters in the statement than the {len(values)} given")
        cast = match.group(2) or _cast(values[position - 1])
        return f"${position}{cast}"

    sql = _PARAMETER.sub(replace, statement)
    if position != len(values):
        raise ValueError(f"{position} parameters in the statement, {len(values)} given")
    return sql, values


def _cast(value: Any) -> str:
    if isinstance(value, bool):
        return "::boolean"
    if isinstance(value, int):
        return "::bigint"
    if isinstance(value, float):
        return "::float8"
    return ""  # text, or a NULL: typed by its column, or as text


class LoopLink:
    """A pool of asyncpg connections on the loop that opened it."""

    def __init__(self, url: URL) -> None:
        """Raises UnsupportedUrl for a URL asyncpg cannot honour."""
        self._arguments = connect_arguments(url)
        self._link = link_settings(url)
        self._pool: asyncpg.Pool | None = None

    async def open(self) -> None:
        """Connect now: a database asyncpg cannot reach fails the start, not the first task."""
        self._pool = await asyncpg.create_pool(
            **self._arguments,
            min_size=1,
            max_size=POOL_SIZE,
            init=self._init,
            reset=_nothing_to_reset,
        )

    async def connect(self) -> asyncpg.Connection:
        """A connection of the caller's own (the event log's writer keeps one)."""
        conn = await asyncpg.connect(**self._arguments)
        await self._init(conn)
        return conn

    async def _init(self, conn: asyncpg.Connection) -> None:
        apply_link_settings(conn, self._link)

    async def fetch(
        self, statement: str, params: Sequence[Any], *, repeatable: bool
    ) -> list[tuple[Any, ...]]:
        """One statement in autocommit (psycopg-style parameters); its rows. On a lost link
        every pooled connection is replaced (the others are likely gone too) and the statement
        sent once more if it is `repeatable` (a read) or the server said it had ended the
        session before answering; a write otherwise is not, since its commit may have landed."""
        sql, values = numbered(statement, params)
        try:
            return await self._fetch(sql, values)
        except Disconnected as lost:
            assert self._pool is not None
            await self._pool.expire_connections()
            if not (repeatable or _session_ended(lost)):
                raise
            return await self._fetch(sql, values)

    async def _fetch(self, sql: str, values: list[Any]) -> list[tuple[Any, ...]]:
        assert self._pool is not None, "LoopLink.open() first"
        async with self._pool.acquire() as conn:
            return [tuple(row) for row in await conn.fetch(sql, *values)]

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), 10)
            except TimeoutError:
                pool.terminate()


def _session_ended(error: BaseException) -> bool:
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, _SESSION_ENDED):
            return True
        cause = cause.__cause__
    return False


async def _nothing_to_reset(_conn: asyncpg.Connection) -> None:
    """A pooled connection's state needs no reset query at each release (asyncpg's default, a
    round trip per statement): these statements run in autocommit and set, hold and listen
    to nothing."""
