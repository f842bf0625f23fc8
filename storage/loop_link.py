"""PostgreSQL's hot statements, sent from the event loop.

A task's acceptance, its event-log commits and the read of its principal's default harnesses
are one statement each. Sent from a thread through psycopg, each costs two thread hand-offs and
psycopg's Python on both sides of the round trip, and the thread then waits for the busy loop
to let go of the GIL (bench/README.md measured all of it). asyncpg sends them from the loop
itself: its protocol is compiled, and its sockets are watched by the loop like any client's, so
nothing blocks and no thread takes part. Everything else (the ORM's reads and writes, the
admission line, migrations) stays on the threads of storage/db.py. SQLite has no such link:
its calls block, so they stay on threads.

The statements are written as for psycopg (`%s`, `%s::json`); `numbered` turns them into
asyncpg's `$n`, typed from the values, since asyncpg sends parameters typed and PostgreSQL
cannot always infer them (a VALUES list types an untyped parameter as text).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import asyncpg
from sqlalchemy.engine import URL

from storage.raw_sql import LINK_TIMEOUTS

# Connections the loop keeps for acceptances and reads; more simultaneous statements wait for
# one (each is a single round trip). The event log's writer holds one more of its own.
POOL_SIZE = 4
# The longest a hot statement may wait for its answer: the threads' connections get the same
# bound from TCP (LINK_TIMEOUTS' tcp_user_timeout); asyncpg has no keepalive settings.
STATEMENT_SECONDS = 15.0
_PARAMETER = re.compile(r"%(s|%)(::json)?")
# libpq options asyncpg would take for server settings (it treats what it does not know so)
_NOT_SERVER_SETTINGS = {*LINK_TIMEOUTS, "connect_timeout"}
Disconnected = (asyncpg.exceptions.ConnectionDoesNotExistError, ConnectionError, OSError)
IntegrityError = asyncpg.exceptions.IntegrityConstraintViolationError


def connect_arguments(url: URL) -> dict[str, Any]:
    """asyncpg's arguments for the server's database URL: its libpq-only options left out (the
    connect timeout becomes asyncpg's own)."""
    query = dict(url.query)
    timeout = float(str(query.get("connect_timeout", LINK_TIMEOUTS["connect_timeout"])))
    kept = {key: value for key, value in query.items() if key not in _NOT_SERVER_SETTINGS}
    dsn = url.set(drivername="postgresql", query=kept).render_as_string(hide_password=False)
    return {"dsn": dsn, "timeout": timeout}


def numbered(statement: str, params: Sequence[Any]) -> tuple[str, list[Any]]:
    """A psycopg-style statement as asyncpg's: `%s` → `$n` with a cast from the value's type
    (`%s::json` keeps its own), `%%` → `%`, and NUL in text as U+FFFD (PostgreSQL's text
    cannot hold NUL; storage/raw_sql.nul_safe_text does the same for psycopg)."""
    values = [_nul_safe(value) for value in params]
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


async def _nothing_to_reset(_conn: asyncpg.Connection) -> None:
    """A pooled connection's state needs no reset query at each release (asyncpg's default, a
    round trip per statement): these statements run in autocommit and set, hold and listen
    to nothing."""


def _nul_safe(value: Any) -> Any:
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


class LoopLink:
    """A pool of asyncpg connections on the loop that opened it."""

    def __init__(self, url: URL) -> None:
        self._arguments = connect_arguments(url)
        self._pool: asyncpg.Pool | None = None

    async def open(self) -> None:
        """Connect now: a URL asyncpg cannot use fails the start, not the first task."""
        self._pool = await asyncpg.create_pool(
            **self._arguments,
            min_size=1,
            max_size=POOL_SIZE,
            command_timeout=STATEMENT_SECONDS,
            reset=_nothing_to_reset,
        )

    async def connect(self) -> asyncpg.Connection:
        """A connection of the caller's own (the event log's writer keeps one)."""
        return await asyncpg.connect(**self._arguments, command_timeout=STATEMENT_SECONDS)

    async def fetch(
        self, statement: str, params: Sequence[Any], *, repeatable: bool
    ) -> list[tuple[Any, ...]]:
        """One statement in autocommit (psycopg-style parameters); its rows. A `repeatable`
        one (a read) runs once more on a new connection when the database had ended the pooled
        one; a write does not, since its commit may have landed before the link went."""
        sql, values = numbered(statement, params)
        assert self._pool is not None, "LoopLink.open() first"
        try:
            return await self._fetch(sql, values)
        except Disconnected:
            if not repeatable:
                raise
            return await self._fetch(sql, values)

    async def _fetch(self, sql: str, values: list[Any]) -> list[tuple[Any, ...]]:
        assert self._pool is not None
        async with self._pool.acquire() as conn:
            return [tuple(row) for row in await conn.fetch(sql, *values)]

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.wait_for(pool.close(), STATEMENT_SECONDS)
