"""Storage's unit of work (storage/unit.py, storage/db.py): `fn(tx, *args)` runs in one
transaction on one connection, committed once when it returns, written nowhere when it raises;
storage functions composed in one write are one transaction; a read sees what a write
committed; and the dialect object holds what differs between the databases.

On SQLite in process (the fast tier); the PostgreSQL pass runs the same file on a database of
its own (UHP_TEST_DATABASE=postgresql, scripts/test.sh)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError

from storage import responses as response_store
from storage import sessions as session_store
from storage.db import Database, Order
from storage.dialect import PostgresDialect, SQLiteDialect, psycopg_style
from storage.tables import ResponseRow, SessionRow
from storage.unit import OutcomeUnknown, Statement, Tx, one_statement, repeatable, statement_of
from tests.support import postgres
from uhp_server.settings import Settings

ON_POSTGRESQL = postgres.TEST_DATABASE == "postgresql"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(Settings(data_dir=tmp_path).database)
    yield database
    database.close()


def _response(response_id: str) -> ResponseRow:
    return ResponseRow(
        id=response_id, principal_id="p", session_id="s", status="in_progress", created_at=1
    )


def _session(session_id: str, held_by: str | None = None) -> SessionRow:
    return SessionRow(
        id=session_id,
        principal_id="p",
        harness_id="h",
        container_id="c",
        created_at=1,
        updated_at=1,
        active_response_id=held_by,
    )


def _events(tx: Tx, response_id: str) -> list[int]:
    rows = tx.rows("SELECT seq FROM event WHERE response_id = ? ORDER BY seq", (response_id,))
    return [seq for (seq,) in rows]


def _insert_event(tx: Tx, response_id: str, seq: int) -> None:
    """Plain SQL on the unit's connection, beside the ORM's rows."""
    tx.execute(
        "INSERT INTO event (response_id, seq, data) VALUES (?, ?, ?)", (response_id, seq, "{}")
    )


class _Refused(Exception):
    pass


async def test_a_write_that_raises_leaves_nothing(db: Database) -> None:
    def half_then_fails(tx: Tx) -> None:
        response_store.insert_response(tx, _response("resp_1"))  # the ORM's
        _insert_event(tx, "resp_1", 0)  # plain SQL's
        raise _Refused

    with pytest.raises(_Refused):
        await db.write(half_then_fails)

    assert await db.read(response_store.get_response, "p", "resp_1") is None
    assert await db.read(_events, "resp_1") == []


async def test_two_storage_functions_composed_in_one_write_are_one_transaction(
    db: Database,
) -> None:
    def both(tx: Tx, response_id: str, seq: int) -> None:
        response_store.insert_response(tx, _response(response_id))
        _insert_event(tx, response_id, seq)

    await db.write(both, "resp_1", 0)
    assert (await db.read(response_store.get_response, "p", "resp_1")) is not None
    assert await db.read(_events, "resp_1") == [0]

    # The second part fails (its primary key is taken): the first part goes with it.
    def then_a_taken_event(tx: Tx) -> None:
        response_store.insert_response(tx, _response("resp_2"))
        _insert_event(tx, "resp_1", 0)

    with pytest.raises(db.dialect.integrity_error):
        await db.write(then_a_taken_event)
    assert await db.read(response_store.get_response, "p", "resp_2") is None
    assert await db.read(_events, "resp_1") == [0]


async def test_a_read_sees_what_a_write_committed_and_plain_sql_sees_the_orms_rows(
    db: Database,
) -> None:
    def written_then_read(tx: Tx) -> list[str]:
        response_store.insert_response(tx, _response("resp_1"))
        tx.orm.add(_session("s"))
        _insert_event(tx, "resp_1", 0)
        # Plain SQL in the same unit sees the ORM's rows not yet flushed.
        return [row[0] for row in tx.rows("SELECT id FROM session WHERE id = ?", ("s",))]

    assert await db.write(written_then_read) == ["s"]
    row = await db.read(response_store.get_response, "p", "resp_1")
    assert row is not None and row.status == "in_progress"
    assert db.run(_events, "resp_1") == [0]  # the synchronous entry, on this thread


async def test_a_claim_composed_with_the_release_of_another_session_is_one_unit(
    db: Database,
) -> None:
    # The claim is the acceptance's gate; its None (held by another turn) is the caller's
    # to turn into a rollback of everything else in the unit.
    db.run(session_store.insert_session, _session("s1", held_by="resp_old"))
    db.run(session_store.insert_session, _session("s2"))

    def move(tx: Tx) -> None:
        session_store.release_session(tx, "s2", "none", "completed", None)
        if session_store.claim(tx, "s1", "resp_new") is None:
            raise _Refused

    with pytest.raises(_Refused):
        await db.write(move)
    s2 = await db.read(session_store.get_session, "p", "s2")
    assert s2 is not None and s2.status == "in_progress"  # not released: one unit
    held = db.run(session_store.claim, "s2", "resp_new")
    assert held is not None and held.id == "s2"
    assert db.run(session_store.active_response, "s2") == "resp_new"


def _on_which_thread(tx: Tx) -> str:
    return threading.current_thread().name


async def test_writes_queue_where_their_order_says(db: Database) -> None:
    on = {order: await db.write(_on_which_thread, order=order) for order in Order}
    assert on[Order.LOG] == "db-write"  # in order with the event log's appends
    if db.dialect.one_writer:  # SQLite: one writer takes every write, in order
        assert set(on.values()) == {"db-write"}
    else:
        assert on[Order.LINE].startswith("db-write-line")
        assert on[Order.ANY].startswith("db-write-any")
    assert (await db.read(_on_which_thread)).startswith("db-read")


def _rows_of(statement: str, params: tuple[object, ...]) -> Statement[list[tuple[object, ...]]]:
    return Statement(statement, params, lambda rows: rows)


select = one_statement(_rows_of)


async def test_a_one_statement_function_is_a_storage_function_like_any_other(
    db: Database,
) -> None:
    assert statement_of(select, db.dialect, ("SELECT 1", ())) is not None
    assert statement_of(_events, db.dialect, ("resp_1",)) is None
    assert await db.read(select, "SELECT ? + 1", (1,)) == [(2,)]
    assert db.run(select, "SELECT ?", ("x",)) == [("x",)]
    assert await db.write(select, "SELECT ?", (3,), order=Order.ANY) == [(3,)]


_lost_once: list[str] = []  # the unit id of each time a write was sent


def _lost(tx: Tx) -> None:
    """What the unit raises when the database ended the connection under it."""
    raise DBAPIError(None, None, Exception("the link went"), connection_invalidated=True)


@repeatable()
def _repeatable_write(tx: Tx, response_id: str) -> str:
    _lost_once.append(tx.unit_id)
    if len(_lost_once) == 1:
        _lost(tx)
    response_store.insert_response(tx, _response(response_id))
    return tx.unit_id


def _lost_every_time(tx: Tx) -> None:
    _lost_once.append(tx.unit_id)
    _lost(tx)


async def test_a_repeatable_write_is_sent_once_more_after_a_lost_connection_with_its_id(
    db: Database,
) -> None:
    _lost_once.clear()
    unit_id = await db.write(_repeatable_write, "resp_1", order=Order.LINE)
    assert _lost_once == [unit_id, unit_id]  # the same id both times
    assert await db.read(response_store.get_response, "p", "resp_1") is not None

    _lost_once.clear()
    with pytest.raises(OutcomeUnknown):
        await db.write(repeatable()(_lost_every_time), order=Order.LINE)
    assert len(_lost_once) == 2


async def test_a_write_not_declared_repeatable_is_not_sent_again(db: Database) -> None:
    _lost_once.clear()

    def once(tx: Tx) -> None:
        _lost_once.append("sent")
        _lost(tx)

    with pytest.raises(DBAPIError):
        await db.write(once)
    assert _lost_once == ["sent"]


async def test_a_read_is_read_again_once_after_a_lost_connection(db: Database) -> None:
    tries: list[int] = []

    def read(tx: Tx) -> int:
        tries.append(1)
        if len(tries) == 1:
            _lost(tx)
        return int(tx.rows("SELECT 3")[0][0])

    assert await db.read(read) == 3
    assert len(tries) == 2


def test_the_dialect_holds_what_differs_between_the_databases(db: Database) -> None:
    sqlite = SQLiteDialect(":memory:")
    assert (sqlite.one_writer, sqlite.shared, sqlite.writes_in_with) == (True, False, False)
    assert sqlite.sql("SELECT ? WHERE a = :a") == "SELECT ? WHERE a = :a"  # its own spelling
    assert sqlite.conninfo is None  # nothing to LISTEN on

    from sqlalchemy.engine import make_url

    postgresql = PostgresDialect(make_url("postgresql+psycopg://u:p@h:5432/d"))
    assert (postgresql.one_writer, postgresql.shared, postgresql.writes_in_with) == (
        False,
        True,
        True,
    )
    assert postgresql.sql("SELECT ?, '?', x::json WHERE a = :a AND b LIKE '5%'") == (
        "SELECT %s, '?', x::json WHERE a = %(a)s AND b LIKE '5%%'"
    )
    assert psycopg_style("SELECT 5 % 2") == "SELECT 5 %% 2"
    assert postgresql.conninfo is not None and "keepalives=1" in postgresql.conninfo

    # The database's clock, in seconds since the epoch, as each one spells it.
    ((now,),) = db.run(lambda tx: tx.rows(f"SELECT {tx.dialect.now}"))
    assert float(now) > 1_700_000_000
    assert type(db.dialect) is (PostgresDialect if ON_POSTGRESQL else SQLiteDialect)


async def test_what_waits_for_the_commit_runs_after_it_and_never_for_a_unit_that_raised(
    db: Database,
) -> None:
    seen: list[object] = []

    def told_after(tx: Tx, response_id: str, fails: bool) -> None:
        response_store.insert_response(tx, _response(response_id))
        # Another connection's look, once committed: the row is there to see.
        tx.after_commit(lambda: seen.append(db.run(response_store.get_response, "p", response_id)))
        if fails:
            raise _Refused

    await db.write(told_after, "resp_1", False)
    assert len(seen) == 1 and seen[0] is not None
    with pytest.raises(_Refused):
        await db.write(told_after, "resp_2", True)
    assert len(seen) == 1
