"""The event log on the database's writer thread: order, durability, and a cancel that answers.

In process, against a real SQLite file. No timings: what is checked is where the writes run,
what a subscriber can see, and what a cancel's reply says.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness_bases import events as ev
from storage import responses as response_store
from storage import sessions as session_store
from storage.db import Database, SessionRelease
from storage.tables import ResponseRow, SessionRow
from tests.support.fakes import FakeBase, FakeSandbox
from uhp_server.engine.reading.fold import TERMINAL_TYPES
from uhp_server.engine.replicas.peers import NoPeers
from uhp_server.engine.requests import TaskStatus
from uhp_server.engine.turns.builder import ResponseBuilder
from uhp_server.engine.turns.eventlog import EventLog
from uhp_server.engine.turns.executor import TurnExecutor
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.engine.turns.run import Run, TurnPlan
from uhp_server.gateway.tokens import TokenRegistry


def _response(response_id: str) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "previous_response_id": None,
        "model": "gpt-test",
        "output": [],
        "store": True,
        "usage": None,
        "metadata": {"session_id": "sess_test"},
    }


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "db.sqlite3")
    yield database
    database.close()


def _insert_response(db: Database, response_id: str) -> None:
    db.run(
        response_store.insert_response,
        ResponseRow(
            id=response_id,
            principal_id="prin_test",
            session_id="sess_test",
            status="in_progress",
            created_at=1,
        ),
    )


def _unread_plan(tmp_path: Path) -> TurnPlan:
    """A turn's plan where nothing reads it."""
    return TurnPlan(
        base=FakeBase(),
        prompt="",
        model="m",
        system_prompt="",
        disabled_tools=(),
        max_step=None,
        timeout_seconds=60,
        max_output_tokens=None,
        native_session_id=None,
        workspace=tmp_path,
        home=tmp_path,
    )


def _stored(db_path: Path | None, response_id: str) -> list[int]:
    """The sequence numbers committed for a response, read on a connection of our own."""
    assert db_path is not None  # (a SQLite file: these tests read it beside the server)
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        rows = conn.execute(
            "SELECT seq FROM event WHERE response_id = ? ORDER BY seq", (response_id,)
        )
        return [seq for (seq,) in rows]


async def _stream(log: EventLog, builder: ResponseBuilder, deltas: int) -> None:
    """What a streaming turn appends: created, in_progress, then one event per delta."""
    await log.append(builder.created())
    await log.append(builder.in_progress())
    for i in range(deltas):
        await log.append(builder.apply(ev.TextDelta("m1", f"w{i} ")))


async def test_event_rows_are_written_off_the_event_loop(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    inserts_on: set[str] = set()
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def trace(statement: str) -> None:
            if statement.lstrip().upper().startswith("INSERT INTO EVENT"):
                inserts_on.add(threading.current_thread().name)

        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    db.close()  # reconnect through the traced connect
    log = EventLog(db, "resp_thread", persist=True)
    await _stream(log, ResponseBuilder(_response("resp_thread")), 5)
    assert inserts_on, "no event row was written"
    assert threading.current_thread().name not in inserts_on  # never on the loop's thread


async def test_a_subscriber_only_ever_sees_committed_events(db: Database) -> None:
    _insert_response(db, "resp_seen")
    log = EventLog(db, "resp_seen", persist=True)
    builder = ResponseBuilder(_response("resp_seen"))
    seen: list[int] = []
    uncommitted: list[int] = []

    async def subscriber() -> None:
        async for event in log.follow():
            seq = event["sequence_number"]
            seen.append(seq)
            if seq not in _stored(db.path, "resp_seen"):
                uncommitted.append(seq)

    following = asyncio.create_task(subscriber())
    # Several appenders at once (the turn and a cancel do this): order stays exact.
    await asyncio.gather(
        _stream(log, builder, 30),
        *(log.append(builder.apply(ev.Notice(f"note {i}"))) for i in range(5)),
    )
    await log.append(builder.finish(TaskStatus.COMPLETED))
    await asyncio.wait_for(following, 10)
    assert uncommitted == []
    assert seen == list(range(len(seen))) == _stored(db.path, "resp_seen")
    assert [e["sequence_number"] for e in log.events] == seen
    row = db.run(response_store.get_response, "prin_test", "resp_seen")
    assert row is not None and row.status == "completed" and row.final is not None
    assert row.final["id"] == "resp_seen"


async def test_concurrent_appends_from_many_runs_are_all_persisted_in_order(
    db: Database,
) -> None:
    runs, deltas = 40, 25
    logs = [EventLog(db, f"resp_{i}", persist=True) for i in range(runs)]
    builders = [ResponseBuilder(_response(f"resp_{i}")) for i in range(runs)]
    await asyncio.gather(*(_stream(log, b, deltas) for log, b in zip(logs, builders, strict=True)))
    await asyncio.gather(
        *(log.append(b.finish(TaskStatus.COMPLETED)) for log, b in zip(logs, builders, strict=True))
    )
    for i, log in enumerate(logs):
        stored = db.run(response_store.events_after, f"resp_{i}")
        assert stored == log.events
        assert [e["sequence_number"] for e in stored] == list(range(len(stored)))
        assert sum(e["type"] == "response.output_text.delta" for e in stored) == deltas
        assert stored[-1]["type"] in TERMINAL_TYPES


async def test_appending_after_the_terminal_event_is_refused_at_once(db: Database) -> None:
    log = EventLog(db, "resp_end", persist=True)
    builder = ResponseBuilder(_response("resp_end"))
    await log.append(builder.created())
    ending = asyncio.create_task(log.append(builder.finish(TaskStatus.CANCELLED)))
    await asyncio.sleep(0)  # the terminal event is queued, not yet committed
    assert log.ending
    with pytest.raises(RuntimeError):
        await log.append(builder.in_progress())
    await ending
    assert log.finished and log.current()["status"] == "cancelled"


async def test_a_cancel_answers_cancelled_even_when_the_turn_never_reacts(
    db: Database, tmp_path: Path
) -> None:
    """A turn that does not get to run (the loop is busy with 30 streaming turns, or it is
    stuck) must not leave the cancel's reply `in_progress`: the cancel ends the log itself."""
    _insert_response(db, "resp_stuck")
    db.run(
        session_store.insert_session,
        SessionRow(
            id="sess_stuck",
            principal_id="prin_test",
            harness_id="harness_test",
            container_id="cntr_test",
            title="",
            created_at=1,
            updated_at=1,
            active_response_id="resp_stuck",
        ),
    )
    no_peers = NoPeers(lambda: None)
    executor = TurnExecutor(FakeSandbox(), TokenRegistry(), tmp_path, 0)  # (no turn is started)
    manager = RunRegistry(db, executor, no_peers)
    stuck = Run(
        response_id="resp_stuck",
        principal_id="prin_test",
        session_id="sess_stuck",
        plan=_unread_plan(tmp_path),
        log=EventLog(db, "resp_stuck", persist=True),
        builder=ResponseBuilder(_response("resp_stuck")),
    )
    # The session goes free with the terminal event, as TaskService.start arranges.
    stuck.log.release_on_end = lambda: SessionRelease("sess_stuck", None)
    await _stream(stuck.log, stuck.builder, 3)
    manager._running[stuck.session_id] = stuck  # registered as RunRegistry.start would
    busy = [EventLog(db, f"resp_busy_{i}", persist=True) for i in range(30)]
    stop = asyncio.Event()

    async def keep_streaming(log: EventLog) -> None:
        builder = ResponseBuilder(_response(log.response_id))
        await _stream(log, builder, 1)
        while not stop.is_set():
            await log.append(builder.apply(ev.TextDelta("m1", "more ")))
            await asyncio.sleep(0)  # a turn yields between its CLI's lines

    streaming = [asyncio.create_task(keep_streaming(log)) for log in busy]
    try:
        await manager.cancel(stuck)
    finally:
        stop.set()
        await asyncio.gather(*streaming)
    assert stuck.stop.is_set()
    assert stuck.log.finished
    reply = stuck.log.current()
    assert reply["status"] == "cancelled"
    assert reply["output"][-1]["status"] == "incomplete"  # the partial answer is kept
    row = db.run(response_store.get_response, "prin_test", "resp_stuck")
    assert row is not None and row.status == "cancelled"
    session = db.run(session_store.get_session, "prin_test", "sess_stuck")
    assert session is not None and session.active_response_id is None  # takes the next task
    assert _stored(db.path, "resp_stuck") == [e["sequence_number"] for e in stuck.log.events]
    for log in busy:  # every append of the other runs was persisted, gapless
        assert _stored(db.path, log.response_id) == list(range(len(log.events)))


def _database_away(db: Database, monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
    """The next `failures` connections the writer opens fail, as while a database restarts;
    its current connection is gone."""
    real = db.connection
    left = {"failures": failures}

    def connection() -> Any:
        if left["failures"] > 0:
            left["failures"] -= 1
            raise sqlite3.OperationalError("the database system is shutting down")
        return real()

    monkeypatch.setattr(db, "connection", connection)


def _append(db: Database, seq: int) -> None:
    event = {"type": "response.in_progress", "sequence_number": seq}
    db.append_events(response_store.event_batch("resp_away", [event])).result(timeout=30)


def test_the_writer_waits_for_a_database_that_comes_back(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    _insert_response(db, "resp_away")
    _database_away(db, monkeypatch, failures=3)  # about 0.7 s of backoff
    _append(db, 0)
    assert [e["sequence_number"] for e in db.run(response_store.events_after, "resp_away")] == [0]
    assert db.writer_alive


def test_a_database_that_stays_away_fails_the_write_not_the_writer(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage import db as db_module

    _insert_response(db, "resp_away")
    monkeypatch.setattr(db_module, "RECONNECT_SECONDS", 0.2)
    _database_away(db, monkeypatch, failures=1_000_000)
    with pytest.raises(sqlite3.OperationalError):
        _append(db, 0)
    assert db.writer_alive  # and /readyz would say so if it were not
    monkeypatch.setattr(db, "connection", Database.connection.__get__(db))
    _append(db, 0)  # back: the same writer commits again
    assert [e["sequence_number"] for e in db.run(response_store.events_after, "resp_away")] == [0]


def a_bad_batch_fails_alone_in_its_group(db: Database) -> None:
    """Batches of three responses queue while the writer is busy, so that they are committed
    in one group (one INSERT of all their rows, on PostgreSQL); the middle one repeats a
    stored event's number. It alone fails: the others' rows are all stored."""
    for response_id in ("resp_a", "resp_b", "resp_c"):
        _insert_response(db, response_id)
    first = [{"type": "response.in_progress", "sequence_number": 0}]
    db.append_events(response_store.event_batch("resp_b", first)).result(timeout=30)
    busy, go_on = threading.Event(), threading.Event()

    def hold_the_writer() -> None:
        busy.set()
        go_on.wait(10)

    held = db._the_writer().submit(hold_the_writer)
    assert busy.wait(10)
    writes = {
        response_id: db.append_events(
            response_store.event_batch(
                response_id,
                [{"type": "response.in_progress", "sequence_number": n} for n in range(2)],
            )
        )
        for response_id in ("resp_a", "resp_b", "resp_c")
    }
    go_on.set()
    held.result(timeout=10)

    with pytest.raises(Exception):  # noqa: B017  (the driver's own integrity error)
        writes["resp_b"].result(timeout=30)
    for response_id in ("resp_a", "resp_c"):
        writes[response_id].result(timeout=30)
        stored = db.run(response_store.events_after, response_id)
        assert [event["sequence_number"] for event in stored] == [0, 1]
    assert [e["sequence_number"] for e in db.run(response_store.events_after, "resp_b")] == [0]


def test_a_bad_batch_fails_alone_in_its_group(db: Database) -> None:
    a_bad_batch_fails_alone_in_its_group(db)
