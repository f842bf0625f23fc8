"""The admission blocks of storage/replicas.py and engine/replicas/shared_admission.py on one
PostgreSQL database, driven directly (no app): a change of a block repeated after a lost answer
counts once, and a replica's own queue keeps the order its turns came in. (Two replicas in
process: tests/test_replicas_admission.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage import db as db_module
from storage import replicas as replica_store
from storage import responses as response_store
from storage.db import Database, Order
from storage.tables import ResponseRow
from storage.unit import Tx
from tests.support.replica_pair import ONLY_ON_POSTGRESQL
from uhp_server.engine.replicas.lease import Lease
from uhp_server.engine.replicas.shared_admission import SharedAdmission
from uhp_server.settings import Settings

pytestmark = ONLY_ON_POSTGRESQL

LEASE = 30.0


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(Settings(data_dir=tmp_path).database)
    yield database
    database.close()


def _sql(db: Database, statement: str, **params: Any) -> Any:
    return db.run(lambda tx: tx.rows(statement, params))


def _block_of(db: Database, replica_id: str) -> int:
    return int(_sql(db, "SELECT slots FROM replica WHERE id = :id", id=replica_id)[0][0])


def _turn(db: Database, response_id: str, replica_id: str, admission: str | None) -> None:
    """A running turn of `replica_id`, in the line as `admission` says."""
    db.run(
        response_store.insert_response,
        ResponseRow(
            id=response_id,
            principal_id="p",
            session_id=f"s_{response_id}",
            status="in_progress",
            created_at=1,
            replica_id=replica_id,
            admission=admission,
            admission_at=time.time(),
        ),
    )


Fault = Callable[[Any, Callable[[Any], Any]], Any]


@contextlib.contextmanager
def _answer_lost(conn: Any, pipeline: Callable[[Any], Any]) -> Iterator[Any]:
    """A transaction that commits, and whose answer never comes back (the link went away
    right after the COMMIT): what a repeatable write sends again."""
    import psycopg

    with pipeline(conn) as sent:
        yield sent
    conn.close()
    raise psycopg.OperationalError("server closed the connection unexpectedly")


@contextlib.contextmanager
def _away(conn: Any, pipeline: Callable[[Any], Any]) -> Iterator[Any]:
    """The database is out of reach: the transaction fails before anything is sent."""
    import psycopg

    raise psycopg.OperationalError("connection refused")
    yield


def _faulty(db: Database, monkeypatch: pytest.MonkeyPatch, faults: Iterable[Fault | None]) -> None:
    """The next transactions sent pipelined (the admission line's, Order.LINE) go wrong as
    `faults` say, one each (None: as it should); the ones after them, as they should."""
    real = db.dialect.pipelined
    pending = iter(faults)

    def pipelined(conn: Any) -> Any:
        fault = next(pending, None)
        return real(conn) if fault is None else fault(conn, real)

    monkeypatch.setattr(db.dialect, "pipelined", pipelined)


def _next_answer_lost(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    _faulty(db, monkeypatch, [_answer_lost])


def _answer_lost_then_away(db: Database, monkeypatch: pytest.MonkeyPatch, away: int) -> None:
    """The next transaction commits and its answer is lost; the `away` after it fail."""
    _faulty(db, monkeypatch, [_answer_lost, *[_away] * away])


async def _on_the_line(db: Database, fn: Any, *args: Any) -> Any:
    """`fn(tx, *args)` as the admission line writes: Order.LINE."""
    return await db.write(fn, *args, order=Order.LINE)


def _live_lease() -> Lease:
    """A lease just renewed (by the cluster these tests leave out)."""
    lease = Lease(LEASE)
    lease.renewed(time.monotonic())
    return lease


class _NoNotes:
    def on(self, channel: str, handler: Any) -> None:
        pass


async def _an_idle_block_slot_and_a_turn_waiting(db: Database) -> SharedAdmission:
    """Limit 2, both slots in a's block, t1 running on one, the other idle; w waits on b."""
    db.run(replica_store.renew_lease, "a", LEASE)
    line = SharedAdmission(db, "a", 2, _live_lease(), _NoNotes())  # type: ignore[arg-type]  # no listener
    await line.acquire("t1")
    await line.acquire("t2")
    line.release("t2")  # idle in the block
    _turn(db, "w", "b", "waiting")
    return line


def _lapse(tx: Tx, line: SharedAdmission) -> None:
    """On the admission line's thread: a renewal finds a's lease lapsed."""
    tx.execute("UPDATE replica SET heartbeat_at = heartbeat_at - 60 WHERE id = 'a'")
    assert replica_store.renew_lease(tx, "a", LEASE) is True
    line.lease_lapsed()


async def test_a_block_slot_whose_answer_was_lost_is_taken_once(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.run(replica_store.renew_lease, "a", LEASE)
    _next_answer_lost(db, monkeypatch)

    taken = await _on_the_line(db, replica_store.take_block_slot, "a", 4, LEASE)
    assert taken == replica_store.GRANTED
    assert _block_of(db, "a") == 1  # the one slot the caller counts


async def test_block_slots_given_back_whose_answer_was_lost_are_handed_on_once(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Limit 2, both slots in a's block, one of them running a turn; two turns wait on b.
    for name in ("a", "b"):
        db.run(replica_store.renew_lease, name, LEASE)
    _sql(db, "UPDATE replica SET slots = 2 WHERE id = 'a'")
    _turn(db, "w1", "b", "waiting")
    _turn(db, "w2", "b", "waiting")
    _next_answer_lost(db, monkeypatch)

    await _on_the_line(db, replica_store.give_back_block_slots, "a", 1, 2, LEASE)  # idle slot

    admitted = _sql(db, "SELECT id FROM response WHERE admission = 'admitted'")
    assert (_block_of(db, "a"), [row[0] for row in admitted]) == (1, ["w1"])


async def test_a_give_back_whose_outcome_is_unknown_is_repeated_until_its_lease_lapsed(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its answer lost, then the database away: sent again until the lease has surely lapsed
    # (no renewal runs meanwhile: the same thread makes them), whose renewal empties the block.
    monkeypatch.setattr(db_module, "REPEAT_PAUSE_SECONDS", 0.01)
    monkeypatch.setattr(replica_store, "LAPSE_MARGIN_SECONDS", 0.2)
    lease = 0.5
    db.run(replica_store.renew_lease, "a", lease)
    _sql(db, "UPDATE replica SET slots = 2 WHERE id = 'a'")
    _answer_lost_then_away(db, monkeypatch, away=1000)
    started = time.monotonic()

    with pytest.raises(replica_store.OutcomeUnknown):
        await _on_the_line(db, replica_store.give_back_block_slots, "a", 1, 2, lease)

    assert lease + 0.2 <= time.monotonic() - started < 5
    assert _block_of(db, "a") == 1  # the first attempt's commit
    monkeypatch.undo()
    assert db.run(replica_store.renew_lease, "a", lease) is True  # lapsed: taken anew
    assert _block_of(db, "a") == 0


async def test_a_give_back_the_database_refused_is_not_repeated(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    db.run(replica_store.renew_lease, "a", LEASE)
    _sql(db, "UPDATE replica SET slots = 2 WHERE id = 'a'")
    asked: list[int] = []

    def away(conn: Any, pipeline: Callable[[Any], Any]) -> Any:
        asked.append(1)
        return _away(conn, pipeline)

    _faulty(db, monkeypatch, itertools.repeat(away))

    with pytest.raises(psycopg.OperationalError):
        await _on_the_line(db, replica_store.give_back_block_slots, "a", 1, 2, LEASE)

    assert len(asked) == 1
    monkeypatch.undo()
    assert _block_of(db, "a") == 2  # nothing of it landed: still the block's


def test_a_lease_that_lapsed_comes_back_with_an_empty_block(db: Database) -> None:
    assert db.run(replica_store.renew_lease, "a", LEASE) is True  # none to renew: taken anew
    _sql(db, "UPDATE replica SET slots = 2 WHERE id = 'a'")
    assert db.run(replica_store.renew_lease, "a", LEASE) is False
    assert _block_of(db, "a") == 2
    # Cut off for longer than a lease, not yet deleted: the others stopped counting its block.
    _sql(db, "UPDATE replica SET heartbeat_at = heartbeat_at - :gone WHERE id = 'a'", gone=60)
    assert db.run(replica_store.renew_lease, "a", LEASE) is True
    assert _block_of(db, "a") == 0


async def test_a_replica_queues_its_turns_in_the_order_they_came_though_an_answer_is_slow(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.run(replica_store.renew_lease, "a", LEASE)
    take = replica_store.take_block_slot
    asked = [0]

    def slow_for_the_third(*args: Any) -> Any:
        asked[0] += 1
        if asked[0] == 3:
            time.sleep(0.3)  # a busy database answers the third turn's look late
        return take(*args)

    monkeypatch.setattr(replica_store, "take_block_slot", slow_for_the_third)
    line = SharedAdmission(db, "a", 2, _live_lease(), _NoNotes())  # type: ignore[arg-type]  # no listener
    t1, t2, t3 = (asyncio.ensure_future(line.acquire(turn)) for turn in ("t1", "t2", "t3"))
    await asyncio.sleep(0.1)
    t4 = asyncio.ensure_future(line.acquire("t4"))  # came after t3, while t3's look is out
    await asyncio.sleep(0.6)
    assert t1.done() and t2.done() and not t3.done() and not t4.done()

    line.release("t1")
    await asyncio.sleep(0.05)

    assert t3.done() and not t4.done()
    t4.cancel()


async def test_a_slot_granted_just_before_the_lease_lapsed_is_not_the_blocks(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On the admission line's thread: the block grows for t2, then the next renewal finds the
    # lease lapsed and empties the block, before the event loop takes the grant in.
    db.run(replica_store.renew_lease, "a", LEASE)
    line = SharedAdmission(db, "a", 2, _live_lease(), _NoNotes())  # type: ignore[arg-type]  # no listener
    await line.acquire("t1")
    _turn(db, "t2", "a", None)
    write = db.write

    async def then_a_lapse(fn: Any, *args: Any, order: Order = Order.LOG) -> Any:
        answer = await write(fn, *args, order=order)
        if fn == line._take_on_the_line_thread:
            await write(_lapse, line, order=Order.LINE)
        return answer

    monkeypatch.setattr(db, "write", then_a_lapse)
    await asyncio.wait_for(line.acquire("t2"), 10)  # through the shared line instead

    assert line.block == 0 and _block_of(db, "a") == 0
    states = _sql(db, "SELECT admission FROM response WHERE id = 't2'")
    assert states[0][0] == "admitted"


async def test_block_slots_given_back_whose_answer_was_lost_stay_out_of_the_block(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a gives its idle slot to the line: the commit lands (w is admitted), its answer is
    # lost, and the database stays away for the repeats after. Back in a's block in memory,
    # the slot would admit a turn that nobody else counts: three turns on a limit of two.
    monkeypatch.setattr(db_module, "REPEAT_PAUSE_SECONDS", 0.01)
    db.run(replica_store.renew_lease, "b", LEASE)
    line = await _an_idle_block_slot_and_a_turn_waiting(db)
    _answer_lost_then_away(db, monkeypatch, away=3)

    line._demanded()  # w's DEMAND
    await asyncio.wait_for(asyncio.gather(*line._background), 10)

    admitted = _sql(db, "SELECT id FROM response WHERE admission = 'admitted'")
    assert [row[0] for row in admitted] == ["w"]
    assert line.block == _block_of(db, "a") == 1  # t1's slot only, in memory as on record


async def test_block_slots_whose_give_back_was_refused_stay_in_the_block(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refused (nothing of it landed): the idle slot is still the block's, in memory as on record.
    line = await _an_idle_block_slot_and_a_turn_waiting(db)
    _faulty(db, monkeypatch, itertools.repeat(_away))

    line._demanded()
    await asyncio.wait_for(asyncio.gather(*line._background), 10)

    monkeypatch.undo()
    assert line.block == _block_of(db, "a") == 2


async def test_a_refused_give_back_does_not_refill_a_block_a_lapse_emptied(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A renewal ahead of the give-back on the admission line's thread finds the lease lapsed:
    # the block is empty, in the database and in memory. The give-back, refused after it, must
    # not put its slot back: a block nobody else counts would admit turns over the limit.
    line = await _an_idle_block_slot_and_a_turn_waiting(db)

    lapsing = asyncio.ensure_future(db.write(_lapse, line, order=Order.LINE))
    # (the lapse first, on the line's thread: as it should)
    _faulty(db, monkeypatch, itertools.chain([None], itertools.repeat(_away)))
    line._demanded()  # the idle slot to the line: refused
    await lapsing
    await asyncio.wait_for(asyncio.gather(*line._background), 10)
    await asyncio.sleep(0.05)  # the loop has forgotten the block

    monkeypatch.undo()
    assert line.block == _block_of(db, "a") == 0
