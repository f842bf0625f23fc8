"""What only PostgreSQL can do to storage: its server ends a connection under the writer or
in the pool, and it counts every connection a server leaves open. Runs in the PostgreSQL pass
(UHP_TEST_DATABASE=postgresql, scripts/test.sh)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text

from storage import dialect as dialect_module
from storage import responses as response_store
from storage.db import Database, Order
from storage.event_batches import EventBatch, RowUpdate
from storage.tables import ResponseRow
from storage.unit import Rows, Statement, Tx, one_statement
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support import postgres
from tests.support.fakes import answer
from tests.support.in_process import in_process
from tests.test_event_log_writer import a_bad_batch_fails_alone_in_its_group
from uhp_server.settings import Settings

pytestmark = pytest.mark.skipif(
    postgres.TEST_DATABASE != "postgresql",
    reason="the PostgreSQL pass runs it (UHP_TEST_DATABASE=postgresql)",
)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[str, Database]]:
    """A test's own PostgreSQL database: its URL, and the server's view of it."""
    url = str(Settings(data_dir=tmp_path).database)
    db = Database(url)
    yield url, db
    db.close()


@pytest.fixture
async def on_the_loop(database: tuple[str, Database]) -> AsyncIterator[tuple[str, Database]]:
    """The same, bound to the test's loop as the server's lifespan binds it: the event log's
    commits and the hot statements go through asyncpg (storage/loop_link.py)."""
    _, db = database
    await db.bind_loop()
    yield database
    await db.unbind_loop()


@pytest.fixture(params=["the thread writer", "the loop writer"])
async def either_writer(
    request: pytest.FixtureRequest, database: tuple[str, Database]
) -> AsyncIterator[tuple[str, Database]]:
    """The database with its event log's commits on the thread writer (unbound: the CLI,
    scripts) or on the loop writer (bound, as the server's lifespan binds it)."""
    _, db = database
    bound = request.param == "the loop writer"
    if bound:
        await db.bind_loop()
    yield database
    if bound:
        await db.unbind_loop()


def _rows(statement: str, params: tuple[Any, ...]) -> Statement[Rows]:
    return Statement(statement, params, lambda rows: rows)


# One statement's rows: a storage function that is one statement, sent from the loop once the
# database is bound to it (as the default harnesses' read is, or a task's acceptance).
select = one_statement(_rows)


async def _appended(db: Database, batch: EventBatch, seconds: float = 30) -> None:
    await asyncio.wait_for(asyncio.wrap_future(db.append_events(batch)), seconds)


def _progress(response_id: str, seq: int) -> EventBatch:
    """A batch of one `response.in_progress` event."""
    event = {"type": "response.in_progress", "sequence_number": seq}
    return response_store.event_batch(response_id, [event])


def _running_response(db: Database, response_id: str) -> None:
    db.run(
        response_store.insert_response,
        ResponseRow(
            id=response_id, principal_id="p", session_id="s", status="in_progress", created_at=0
        ),
    )


async def test_event_appends_survive_the_database_ending_the_writers_connection(
    either_writer: tuple[str, Database],
) -> None:
    url, db = either_writer
    _running_response(db, "resp_1")
    await _appended(db, _progress("resp_1", 0))
    assert postgres.end_connections_to(url) >= 1  # the writer's among them
    await _appended(db, _progress("resp_1", 1))
    assert [e["sequence_number"] for e in db.run(response_store.events_after, "resp_1")] == [0, 1]
    assert db.writer_alive


async def test_reads_from_the_loop_are_read_again_on_a_new_connection(
    on_the_loop: tuple[str, Database],
) -> None:
    url, db = on_the_loop
    assert await db.read(select, "SELECT 1", ()) == [(1,)]
    assert postgres.end_connections_to(url) >= 1  # the pool's among them
    assert await db.read(select, "SELECT ?::int + 1", (1,)) == [(2,)]


async def test_a_write_from_the_loop_is_not_repeated_on_a_lost_link(
    on_the_loop: tuple[str, Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its commit may have landed before the link went: a second try could apply it twice
    # (or, for an acceptance, lose to itself). The caller sees the error instead.
    import asyncpg

    from storage import loop_link

    _, db = on_the_loop
    calls: list[str] = []
    real = loop_link.LoopLink._fetch

    async def lost_once(
        self: loop_link.LoopLink, sql: str, values: list[Any]
    ) -> list[tuple[Any, ...]]:
        calls.append(sql)
        if len(calls) == 1:
            raise asyncpg.exceptions.ConnectionDoesNotExistError("the link went")
        return await real(self, sql, values)

    monkeypatch.setattr(loop_link.LoopLink, "_fetch", lost_once)
    with pytest.raises(asyncpg.exceptions.ConnectionDoesNotExistError):
        await db.write(select, "SELECT ?::int", (1,), order=Order.ANY)
    assert len(calls) == 1
    assert await db.read(select, "SELECT ?::int", (2,)) == [(2,)]  # a read is tried again


async def test_the_loops_pooled_connections_ended_while_idle_are_replaced_before_use(
    on_the_loop: tuple[str, Database],
) -> None:
    # The database ends every connection while the loop is busy (it cannot see them close):
    # the acceptance sent on one is refused by the server's own "terminating connection",
    # which proves it was never committed, so it goes again on a new connection; a read too.
    url, db = on_the_loop
    for _ in range(2):
        await asyncio.gather(*(db.read(select, "SELECT pg_sleep(0.05)", ()) for _ in range(4)))
        assert postgres.end_connections_to(url) >= 1  # blocks the loop, as a busy loop would
        time.sleep(0.2)
        assert await db.write(select, "SELECT ?::int", (1,), order=Order.ANY) == [(1,)]
        assert await db.read(select, "SELECT ?::int", (2,)) == [(2,)]


async def test_the_loops_connections_get_the_same_link_timeouts_as_libpq(
    on_the_loop: tuple[str, Database],
) -> None:
    # asyncpg has no option for them: storage/loop_link.py sets them on its sockets itself,
    # through a private attribute of asyncpg's, which this checks still holds.
    import socket

    _, db = on_the_loop
    assert db._loop_link is not None and db._loop_link._pool is not None
    async with db._loop_link._pool.acquire() as conn:
        sock = conn._transport.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 10_000
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 5


async def test_a_url_asyncpg_cannot_honour_keeps_the_statements_on_threads(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # asyncpg would send `channel_binding` as a server setting, which PostgreSQL refuses: the
    # server would not start. It runs on psycopg's threads instead, which honour it.
    url = str(Settings(data_dir=tmp_path).database) + "?channel_binding=prefer"
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, database_url=url) as server:
        assert server.ctx.db._loop_link is None
        server.base.script("short", answer("done"))
        assert (await server.submit("short")).json()["status"] == "completed"


def test_a_loop_that_ends_without_unbinding_is_not_held_up_by_its_writer(
    database: tuple[str, Database],
) -> None:
    # The lifespan's start failed after bind_loop, say: asyncio.run cancels what is left,
    # the writer among it, in the middle of a job; it must let itself be cancelled.
    import threading

    _, db = database

    async def bound_then_gone() -> None:
        await db.bind_loop()
        db._the_writer().submit(lambda: time.sleep(0.5))
        await asyncio.sleep(0.1)

    runner = threading.Thread(target=asyncio.run, args=(bound_then_gone(),), daemon=True)
    runner.start()
    runner.join(timeout=10)
    assert not runner.is_alive()


async def test_event_appends_wait_out_a_postgresql_restart(
    either_writer: tuple[str, Database],
) -> None:
    # The whole cluster restarts (seconds in which no connection can open): the writer waits
    # for it, and the append made meanwhile commits once it is back.
    _, db = either_writer
    _running_response(db, "resp_2")
    await _appended(db, _progress("resp_2", 0))
    _pg_ctl("stop")
    pending = asyncio.wrap_future(db.append_events(_progress("resp_2", 1)))
    await asyncio.sleep(2)  # the database stays away a while
    _pg_ctl("start")
    await asyncio.wait_for(pending, 30)
    assert db.writer_alive
    assert [e["sequence_number"] for e in db.run(response_store.events_after, "resp_2")] == [0, 1]
    assert await db.read(select, "SELECT 1", ()) == [(1,)]  # the readers' connections too


def _pg_ctl(action: str) -> None:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    done = subprocess.run(["pg_ctlcluster", version, "main", action], timeout=60)
    assert done.returncode == 0


async def test_a_bad_batch_fails_alone_in_its_group_of_one_insert(
    either_writer: tuple[str, Database],
) -> None:
    # From a thread, as the recovery appends: the loop stays free to send.
    await asyncio.to_thread(a_bad_batch_fails_alone_in_its_group, either_writer[1])


async def test_a_group_of_events_past_the_protocols_parameter_limit_is_stored_whole(
    either_writer: tuple[str, Database],
) -> None:
    # A long commit (a restart waited out) lets thousands of rows queue into one group: more
    # than one INSERT may carry (65,535 parameters, three a row).
    _, db = either_writer
    _running_response(db, "resp_1")
    events = [{"type": "response.output_text.delta", "sequence_number": n} for n in range(22_000)]
    await _appended(db, response_store.event_batch("resp_1", events), seconds=60)
    stored = db.run(response_store.events_after, "resp_1")
    assert [event["sequence_number"] for event in stored] == list(range(22_000))


async def test_a_group_that_changes_one_row_twice_is_written_in_order_from_the_loop(
    on_the_loop: tuple[str, Database],
) -> None:
    # An unkept end (its status, while in progress) and then a final row for one response,
    # queued behind a job so that they are one group: a transaction of statements, in order.
    import threading

    _, db = on_the_loop
    _running_response(db, "resp_1")
    go_on = threading.Event()
    held = asyncio.wrap_future(db._the_writer().submit(lambda: go_on.wait(10)))
    ended = db.append_events(EventBatch("resp_1", [], status="failed"))
    final = db.append_events(EventBatch("resp_1", [(0, "{}")], final="{}", status="completed"))
    go_on.set()
    await held
    for write in (ended, final):
        await asyncio.wait_for(asyncio.wrap_future(write), 30)
    stored = db.run(response_store.get_response, "p", "resp_1")
    assert stored is not None and stored.status == "completed"
    assert db.run(response_store.events_after, "resp_1") == [{}]


def test_a_group_that_changes_one_row_twice_is_not_written_as_one_statement(
    database: tuple[str, Database],
) -> None:
    # One statement's CTEs share a snapshot: of two updates of one row, which lands is
    # undefined. Such a group is a transaction of statements, in order.
    _, db = database
    _running_response(db, "resp_1")
    first, second = (
        RowUpdate("UPDATE response SET status = ? WHERE id = ?", (status, "resp_1"), row)
        for status, row in (
            ("failed", ("response", "resp_1")),
            ("completed", ("response", "resp_1")),
        )
    )

    def at_once(tx: Tx) -> tuple[bool, bool]:
        return (
            db.dialect.write_at_once(tx.driver, [], [first, second]),
            db.dialect.write_at_once(tx.driver, [("resp_1", 0, "{}")], [second]),
        )

    assert db.run(at_once) == (False, True)
    assert db.run(response_store.events_after, "resp_1") == [{}]
    stored = db.run(response_store.get_response, "p", "resp_1")
    assert stored is not None and stored.status == "completed"


async def test_an_acceptance_past_one_statements_parameters_is_written_whole(
    database: tuple[str, Database],
) -> None:
    # Thousands of inline files are more parameters than one statement carries (65,535): the
    # acceptance is then a transaction of statements, still whole.
    from storage import acceptance as accepting

    _, db = database
    files = [
        accepting.InputFile(f"file_{n}", "a.txt", 1, "text/plain", "0" * 64) for n in range(9000)
    ]
    unit = accepting.AcceptanceRows(
        response=accepting.NewResponse("resp_1", "p", None, True, "m", 0, "[]", None),
        new_session=accepting.NewSession("session_1", "p", "harness_1", "container_1", "t"),
        files=files,
        first_event="{}",
    )
    assert (await db.write(accepting.accept, unit, order=Order.ANY)).id == "session_1"
    # A second turn for the session, still held by the first: the claim loses, nothing is kept.
    busy = accepting.AcceptanceRows(
        response=accepting.NewResponse("resp_2", "p", "resp_1", True, "m", 0, "[]", None),
        claim="session_1",
        files=[
            accepting.InputFile(f"other_{n}", "b.txt", 1, "text/plain", "1" * 64)
            for n in range(9000)
        ],
        first_event="{}",
    )
    with pytest.raises(accepting.Busy):
        await db.write(accepting.accept, busy, order=Order.ANY)

    def stored(tx: Tx) -> tuple[int, bool]:
        count = tx.rows("SELECT count(*) FROM file WHERE principal_id = 'p'")[0][0]
        return count, tx.driver.info.transaction_status == psycopg.pq.TransactionStatus.IDLE

    assert await db.read(stored) == (9000, True)
    assert db.run(response_store.events_after, "resp_1") == [{}]
    assert db.run(response_store.get_response, "p", "resp_2") is None


def test_a_pooled_connection_the_database_ended_while_idle_is_replaced_before_use(
    database: tuple[str, Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pooled connections are pinged only after sitting idle (no round trip per use): one the
    # server ended meanwhile is replaced, and the session using it never sees the loss.
    monkeypatch.setattr(dialect_module, "IDLE_PING_SECONDS", 0.05)
    url, db = database
    assert db.run(_orm_select, 1) == 1
    assert postgres.end_connections_to(url) >= 1  # the pooled one among them
    time.sleep(0.1)
    assert db.run(_orm_select, 2) == 2


def _orm_select(tx: Tx, n: int) -> Any:
    """`SELECT n` through the unit's ORM session."""
    return tx.orm.connection().execute(text(f"SELECT {int(n)}")).scalar()


async def test_reads_and_lone_statements_run_without_a_transaction(tmp_path: Path) -> None:
    # PostgreSQL's READ COMMITTED gives each statement its own snapshot anyway, so a read
    # opens no transaction: no BEGIN and ROLLBACK round trips around it.
    db = Database(str(Settings(data_dir=tmp_path).database))

    def autocommit(tx: Tx) -> bool:
        return bool(tx.driver.autocommit)

    # A transaction begun for the statement alone starts with it (a BEGIN sent first would
    # have started it earlier).
    lone = one_statement(
        lambda: Statement(
            "SELECT xact_start = query_start FROM pg_stat_activity WHERE pid = pg_backend_pid()",
            (),
            lambda rows: bool(rows[0][0]),
        )
    )
    try:
        assert await db.read(autocommit) is True
        assert db.run(lone) is True
        assert await db.write(autocommit) is False  # a writer's transaction is one unit
    finally:
        db.close()


async def test_a_stopped_server_leaves_no_connection_to_its_database(
    tmp_path: Path, provider: RunningProvider
) -> None:
    url = str(Settings(data_dir=tmp_path).database)
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, database_url=url) as server:
        server.base.script("short", answer("done"))
        assert (await server.submit("short")).json()["status"] == "completed"
        assert _connections_to(url) >= 1
    # A backend leaves pg_stat_activity a moment after its client closed the connection.
    deadline = time.monotonic() + 2
    while _connections_to(url) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _connections_to(url) == 0


def _connections_to(url: str) -> int:
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(postgres.ADMIN_URL, autocommit=True) as admin:
        found = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchone()
    assert found is not None
    return int(found[0])


def test_a_pooled_connection_ended_right_after_its_last_use_is_not_handed_out(
    database: tuple[str, Database],
) -> None:
    # Sooner than the idle ping's second: the server's closing word on the socket says so.
    url, db = database
    assert db.run(_orm_select, 1) == 1
    assert postgres.end_connections_to(url) >= 1
    time.sleep(0.05)  # the backends' exits are asynchronous to pg_terminate_backend
    assert db.run(_orm_select, 2) == 2


@pytest.mark.parametrize("through", ["the ORM", "a plain connection"])
async def test_a_read_the_database_ended_the_connection_under_is_read_again(
    database: tuple[str, Database], through: str
) -> None:
    url, db = database
    ended: list[int] = []

    def end_once() -> None:
        if not ended:  # ended after the checkout's check: the statement meets it
            ended.append(postgres.end_connections_to(url))
            time.sleep(0.05)

    def read_once_ended(tx: Tx) -> int:
        if through == "the ORM":
            conn = tx.orm.connection()
            end_once()
            return int(conn.execute(text("SELECT 3")).scalar_one())
        end_once()  # storage's plain SQL (storage/harnesses.py)
        return int(tx.rows("SELECT 3")[0][0])

    assert await db.read(read_once_ended) == 3
    assert ended and ended[0] >= 1


async def test_the_admission_line_outlives_the_database_ending_its_connection(
    database: tuple[str, Database],
) -> None:
    from storage import replicas as replica_store

    url, db = database
    db.run(replica_store.renew_lease, "a", 30.0)
    for n in (1, 2):
        db.run(
            response_store.insert_response,
            ResponseRow(
                id=f"resp_{n}",
                principal_id="p",
                session_id="s",
                status="in_progress",
                created_at=0,
                replica_id="a",
            ),
        )
    assert await db.write(replica_store.join_line, "resp_1", 4, 30.0, order=Order.LINE) is True
    assert postgres.end_connections_to(url) >= 1
    assert await db.write(replica_store.join_line, "resp_2", 4, 30.0, order=Order.LINE) is True
    # A repeat of a join whose commit's answer was lost keeps the slot it took.
    assert await db.write(replica_store.join_line, "resp_2", 1, 30.0, order=Order.LINE) is True


def test_admission_statements_reach_psycopg_with_literals_intact() -> None:
    from storage.dialect import psycopg_style

    statement = "SELECT 'a:b', '10%', x::text, 'it''s :not', 5 % 2 WHERE id = :id"
    assert psycopg_style(statement) == (
        "SELECT 'a:b', '10%%', x::text, 'it''s :not', 5 %% 2 WHERE id = %(id)s"
    )


async def test_requests_right_after_the_database_ended_its_connections_get_no_500(
    tmp_path: Path, provider: RunningProvider
) -> None:
    url = str(Settings(data_dir=tmp_path).database)
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, database_url=url) as server:
        server.base.script("short", answer("done"))
        first = (await server.submit("short")).json()
        assert first["status"] == "completed"
        assert (await server.client.get(f"/v1/responses/{first['id']}")).status_code == 200
        assert postgres.end_connections_to(url) >= 1
        statuses = [
            (await server.client.get(f"/v1/responses/{first['id']}")).status_code for _ in range(3)
        ]
        server.base.script("again", answer("done"))
        again = await server.submit("again")
        assert statuses == [200, 200, 200] and again.status_code == 200, (statuses, again.text)


def test_connections_numbered_past_what_select_can_watch_are_not_taken_for_closed(
    tmp_path: Path,
) -> None:
    # A busy server holds more than 1,024 descriptors (streams, sandboxes, event logs): its
    # next connections are numbered past select()'s FD_SETSIZE, and must still be usable and
    # kept (not replaced at every use, nor refused at every checkout).
    import os

    from uhp_server.http.connections import raise_fd_limit

    # As `serve` does: a soft limit of 1,024 (a container's default) would stop the spare
    # descriptors below before they reach select()'s reach.
    assert raise_fd_limit() > 1200, "this host's hard descriptor limit is below 1,200"
    url = str(Settings(data_dir=tmp_path).database)
    spare = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    db: Database | None = None
    try:
        db = Database(url)
        assert db.run(_orm_select, 1) == 1
        raw = db.connection()
        assert raw.fileno() >= 1024
        assert db.connection() is raw  # not a new connection per use
    finally:
        for fd in spare:
            os.close(fd)
        if db is not None:
            db.close()


def test_threads_outside_the_pool_keep_no_connection_of_their_own(tmp_path: Path) -> None:
    # docs/scale-out.md: a replica holds at most 52 connections, 49 of them pooled. Sync
    # routes (FastAPI's 40 threads) read events (GET /v1/sessions/{id}/turns of a turn running
    # elsewhere) through `db.connection()`, a connection per thread kept for the thread's life
    # beside the pool's: 40 more, past PostgreSQL's default max_connections of 100.
    import threading
    from concurrent.futures import ThreadPoolExecutor

    url = str(Settings(data_dir=tmp_path).database)
    db = Database(url)
    threads = 8
    together = threading.Barrier(threads)

    def read_events(_: int) -> None:
        together.wait()  # each on a thread of its own, as concurrent requests are
        db.run(response_store.events_after, "response_none")

    try:
        with ThreadPoolExecutor(threads) as route_threads:
            list(route_threads.map(read_events, range(threads)))
            held = [conn for conn in db._connections if not conn.closed]
            # The documented ones outside the pool: the event writer's and the admission line's.
            assert len(held) <= 2, f"{len(held)} connections held outside the pool"
    finally:
        db.close()
