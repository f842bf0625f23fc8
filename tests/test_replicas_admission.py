"""The admission line shared by replicas, two in process on one PostgreSQL database
(tests/support/replica_pair.py): the turn limit counts every replica's turns, and turns are
admitted in the order they arrived."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from harness_bases.events import TextDelta
from storage import replicas as replica_store
from storage.db import Database
from storage.unit import Tx
from tests.scripted_provider import RunningProvider
from tests.support.fakes import Hang, answer
from tests.support.in_process import InProcess
from tests.support.replica_pair import (
    LEASE,
    ONLY_ON_POSTGRESQL,
    completed_on,
    replica,
    running_with_text,
    two_replicas,
)
from tests.support.waiting import wait_for
from uhp_server.engine.replicas import shared_admission
from uhp_server.settings import Settings

pytestmark = ONLY_ON_POSTGRESQL


async def test_the_turn_limit_counts_the_turns_of_every_replica(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        holding = await running_with_text(a)
        b.base.script("quick", answer("done"))
        waiting = (await b.submit("quick", background=True)).json()["id"]
        await asyncio.sleep(1.0)
        body = (await b.client.get(f"/v1/responses/{waiting}")).json()
        assert body["status"] == "in_progress" and body["output"] == []
        assert b.run(waiting).queued
        state = await a.ctx.engine.state(a.run(holding).principal_id, waiting)
        assert state.status == "queued"  # seen from the replica it does not wait on, too
        await a.client.post(f"/v1/responses/{holding}/cancel")

        await wait_for(completed_on(b, waiting), 10)


async def test_a_turn_in_its_replicas_own_queue_is_queued_on_every_replica(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # One turn at a time, and a holds the slot in its block: its next turn waits in a's own
    # queue, in no shared line (nobody else wants a slot). b reads it as queued all the same,
    # then as running once a's block admits it.
    async with AsyncExitStack() as stack:
        a, b, holding, waiting = await _a_second_turn_of_a(
            stack, tmp_path, provider, [TextDelta("m", "second answer"), Hang()]
        )
        principal = a.run(holding).principal_id

        async def state_on_b() -> str:
            return (await b.ctx.engine.state(principal, waiting)).status

        await wait_for(lambda: a.run(waiting).queued)
        await wait_for(lambda: _line_states(a.ctx.db, waiting) == ["own_queue"])
        assert await state_on_b() == "queued"
        await a.client.post(f"/v1/responses/{holding}/cancel")

        await wait_for(lambda: _line_states(a.ctx.db, waiting) == [None])
        assert not a.run(waiting).queued
        assert await state_on_b() == "in_progress"
        assert _block_of(a.ctx.db, "a") == 1  # admitted from the block: no shared line
        await b.client.post(f"/v1/responses/{waiting}/cancel")


async def test_a_short_wait_in_a_replicas_own_queue_costs_no_transaction(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_admission, "OWN_QUEUE_MARK_SECONDS", 0.5)
    marks: list[tuple[str, bool]] = []
    real = replica_store.mark_in_own_queue

    def counted(tx: Tx, response_id: str, waiting: bool) -> None:
        marks.append((response_id, waiting))
        real(tx, response_id, waiting)

    monkeypatch.setattr(replica_store, "mark_in_own_queue", counted)
    async with AsyncExitStack() as stack:
        a, _b, holding, waiting = await _a_second_turn_of_a(
            stack, tmp_path, provider, answer("next")
        )
        await wait_for(lambda: a.run(waiting).queued)
        await a.client.post(f"/v1/responses/{holding}/cancel")

        await wait_for(completed_on(a, waiting), 10)
        await asyncio.sleep(0.7)  # past the mark's time: it was called off, not just late
        assert marks == []


async def test_a_turn_cancelled_in_its_replicas_own_queue_is_marked_no_more(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, _b, holding, waiting = await _a_second_turn_of_a(
            stack, tmp_path, provider, answer("next")
        )
        await wait_for(lambda: _line_states(a.ctx.db, waiting) == ["own_queue"])

        await a.client.post(f"/v1/responses/{waiting}/cancel")

        await wait_for(lambda: _line_states(a.ctx.db, waiting) == [None])
        await a.client.post(f"/v1/responses/{holding}/cancel")


def _line_states(db: Database, *response_ids: str) -> list[str | None]:
    rows = _sql(
        db, "SELECT id, admission FROM response WHERE id = ANY(:ids)", ids=list(response_ids)
    )
    states = dict(rows)
    return [states.get(response_id) for response_id in response_ids]


def _sql(db: Database, statement: str, **params: Any) -> list[tuple[Any, ...]]:
    return db.run(lambda tx: tx.rows(statement, params))


async def _ran_in_order(a: InProcess, b: InProcess, holding: str, first: str, then: str) -> None:
    """Once both wait in line, free `holding`'s slot: `first` must run before `then` (the
    limit is one turn)."""

    async def both_wait() -> bool:
        return _line_states(a.ctx.db, first, then) == ["waiting", "waiting"]

    await wait_for(both_wait)
    await a.client.post(f"/v1/responses/{holding}/cancel")

    async def both_done() -> bool:
        bodies = [(await b.client.get(f"/v1/responses/{i}")).json() for i in (first, then)]
        return all(body["status"] == "completed" for body in bodies)

    await wait_for(both_done, 15)
    finished = dict(
        _sql(a.ctx.db, "SELECT id, finished_at FROM response WHERE id IN (:f, :t)", f=first, t=then)
    )
    assert finished[first] < finished[then]


async def test_turns_are_admitted_in_the_order_they_arrived_not_the_order_they_joined(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        holding = await running_with_text(a)
        # b is slow to get its turn to the line (a cold replica opening its connections,
        # say): a's later turn joins the line before it.
        line = b.ctx.runs.executor.admission
        assert line is not None
        join_now = line.acquire

        async def join_late(holder: str, principal: str) -> None:
            await asyncio.sleep(0.5)
            await join_now(holder, principal)

        monkeypatch.setattr(line, "acquire", join_late)
        b.base.script("second", answer("two"))
        second = (await b.submit("second", background=True)).json()["id"]
        a.base.script("third", answer("three"))
        third = (await a.submit("third", background=True)).json()["id"]

        await _ran_in_order(a, b, holding, second, third)


async def test_a_slot_handed_over_is_taken_though_its_notification_was_lost(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_admission, "POLL_SECONDS", 0.2)
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        b.cluster.notes.on(replica_store.ADMISSION_CHANNEL, lambda _id: None)
        holding = await running_with_text(a)
        b.base.script("quick", answer("done"))
        waiting = (await b.submit("quick", background=True)).json()["id"]

        async def in_line() -> bool:
            return _line_states(a.ctx.db, waiting) == ["waiting"]

        await wait_for(in_line)
        await a.client.post(f"/v1/responses/{holding}/cancel")

        await wait_for(completed_on(b, waiting), 10)


async def test_a_slot_whose_release_was_lost_is_free_again_when_its_replica_restarts(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with replica(tmp_path, provider, max_concurrent_turns=1) as a:
        a.base.script("first", answer("one"))
        first = (await a.submit("first")).json()
        assert first["status"] == "completed"
    # The server stopped before the slot's release was written (it is written after the
    # turn's process is gone, by a task the stopping server may not wait for).
    db = Database(Settings(data_dir=tmp_path).database)
    _sql(db, "UPDATE response SET admission = 'admitted' WHERE id = :id", id=first["id"])
    db.close()
    async with replica(tmp_path, provider, max_concurrent_turns=1) as again:
        again.base.script("second", answer("two"))
        second = await asyncio.wait_for(again.submit("second"), 10)
        assert second.json()["status"] == "completed"


async def test_the_line_order_does_not_follow_a_replicas_own_clock(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Leases are timed by the database's clock; a turn's place in line must be too: a
    # replica whose host clock runs a minute behind would otherwise put each of its turns
    # before every turn the others accepted in the last minute.
    from types import SimpleNamespace

    from storage import door_sessions, files, responses, sessions

    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        holding = await running_with_text(a)
        a.base.script("second", answer("two"))
        second = (await a.submit("second", background=True)).json()["id"]
        behind = SimpleNamespace(time=lambda: time.time() - 60)
        for accepting in (door_sessions, files, responses, sessions):  # what its acceptance writes
            monkeypatch.setattr(accepting, "time", behind)  # b's host clock, a minute behind
        b.base.script("third", answer("three"))
        third = (await b.submit("third", background=True)).json()["id"]
        monkeypatch.undo()

        await _ran_in_order(a, b, holding, second, third)


def _block_of(db: Database, replica_id: str) -> int:
    return int(_sql(db, "SELECT slots FROM replica WHERE id = :id", id=replica_id)[0][0])


async def _a_keeping_an_idle_slot(
    stack: AsyncExitStack, data_dir: Path, provider: RunningProvider
) -> tuple[InProcess, InProcess]:
    """Replicas a and b, one turn at a time over both; a ran a turn, and keeps its slot in its
    block, idle, for its next one."""
    a, b = await two_replicas(stack, data_dir, provider, max_concurrent_turns=1)
    a.base.script("first", answer("one"))
    assert (await a.submit("first")).json()["status"] == "completed"
    assert _block_of(a.ctx.db, "a") == 1
    return a, b


async def _a_second_turn_of_a(
    stack: AsyncExitStack, data_dir: Path, provider: RunningProvider, steps: list[Any]
) -> tuple[InProcess, InProcess, str, str]:
    """Replicas a and b, one turn at a time over both: a runs a turn on the slot of its block
    (`holding`), and its next one (`steps`) waits in a's own queue. (a, b, holding, waiting)"""
    a, b = await _a_keeping_an_idle_slot(stack, data_dir, provider)
    holding = await running_with_text(a)
    a.base.script("second", steps)
    waiting = (await a.submit("second", background=True)).json()["id"]
    return a, b, holding, waiting


async def _a_turn_completes_on(b: InProcess) -> None:
    b.base.script("second", answer("two"))
    second = await asyncio.wait_for(b.submit("second"), 10)
    assert second.json()["status"] == "completed"


async def test_a_lone_replica_admits_its_turns_from_its_block_in_arrival_order(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nobody else holds or wants a slot: the replica keeps the slots its turns give back and
    # hands them on in memory, without a transaction of the shared line per turn.
    calls: list[str] = []
    for name in ("take_block_slot", "join_line", "take_slot", "leave_line"):
        real = getattr(replica_store, name)

        def counted(*args: object, _real: Any = real, _name: str = name) -> Any:
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(replica_store, name, counted)
    # (One principal: its share is the whole limit here.)
    async with replica(tmp_path, provider, max_concurrent_turns=2, max_turns_per_principal=2) as a:
        a.base.script("long", [Hang()])
        turns = [(await a.submit("long", background=True)).json()["id"] for _ in range(5)]

        async def two_run_three_wait() -> bool:
            return len(a.sandbox.running) == 2 and all(a.run(turn).queued for turn in turns[2:])

        await wait_for(two_run_three_wait)
        for n, turn in enumerate(turns[:3]):  # each cancel lets the next in line in
            await a.client.post(f"/v1/responses/{turn}/cancel")
            admitted = turns[n + 2]
            await wait_for(lambda: not a.run(admitted).queued)  # noqa: B023
            assert all(a.run(later).queued for later in turns[n + 3 :])

        assert _block_of(a.ctx.db, "a") == 2
        assert "join_line" not in calls and "leave_line" not in calls
        assert calls.count("take_block_slot") <= 3  # two slots taken, perhaps one look
        await a.client.post(f"/v1/responses/{turns[3]}/cancel")
        await a.client.post(f"/v1/responses/{turns[4]}/cancel")


async def test_the_idle_slots_of_a_block_go_to_a_turn_waiting_on_another_replica(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_admission, "POLL_SECONDS", 60.0)  # told, never found by a poll
    async with AsyncExitStack() as stack:
        a, b = await _a_keeping_an_idle_slot(stack, tmp_path, provider)

        await _a_turn_completes_on(b)

        assert _block_of(a.ctx.db, "a") == 0


@pytest.mark.parametrize(
    "renewing",
    [
        pytest.param(False, id="killed: no renewal, its block stops counting with its lease"),
        pytest.param(True, id="listener down: its lease rounds look at the line"),
    ],
)
async def test_a_waiting_turn_gets_the_idle_slot_of_a_replica_deaf_to_every_demand(
    tmp_path: Path, provider: RunningProvider, renewing: bool
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _a_keeping_an_idle_slot(stack, tmp_path, provider)
        cluster = a.cluster
        assert cluster._loop_task is not None
        cluster.notes.on(replica_store.ADMISSION_CHANNEL, lambda _payload: None)
        if not renewing:
            cluster._loop_task.cancel()

        await _a_turn_completes_on(b)

        if renewing:
            assert _block_of(a.ctx.db, "a") == 0  # given to the line


async def test_a_replica_whose_lease_lapsed_admits_nothing_from_its_old_block(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _a_keeping_an_idle_slot(stack, tmp_path, provider)
        cluster = a.cluster
        assert cluster._loop_task is not None
        cluster._loop_task.cancel()  # a stalls for longer than its lease
        await asyncio.sleep(LEASE * 1.5)
        holding = await running_with_text(b)  # b holds the one slot: a's block no longer counts
        cluster._loop_task = asyncio.create_task(cluster._keep_lease())  # a is back
        await wait_for(cluster.lease.current)
        a.base.script("second", answer("two"))
        second = (await a.submit("second", background=True)).json()["id"]
        await asyncio.sleep(0.5)

        assert a.run(second).queued  # not admitted from the block it held
        assert _block_of(a.ctx.db, "a") == 0
        await b.client.post(f"/v1/responses/{holding}/cancel")
        await wait_for(completed_on(a, second), 10)


async def test_a_replica_whose_lease_the_database_found_lapsed_stops_the_turns_of_its_block(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # Its own clock saw every renewal land in time, but one reached the database after the
    # lease had run out (it set out late): the others had stopped counting its block.
    async with replica(tmp_path, provider, max_concurrent_turns=1) as a:
        running = await running_with_text(a)
        assert _block_of(a.ctx.db, "a") == 1
        _sql(a.ctx.db, "UPDATE replica SET heartbeat_at = heartbeat_at - 60 WHERE id = 'a'")

        await wait_for(lambda: a.run(running).abandoned, 5)

        assert _block_of(a.ctx.db, "a") == 0


async def test_one_principals_flood_leaves_a_slot_to_another_over_a_shared_database(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # Two turns at a time, a share of one each (the default: one less than the limit). a's
    # flood runs one turn; the others wait, read as queued on every replica; another
    # principal's task runs at once on the slot the share left.
    from storage import keys

    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider, max_concurrent_turns=2)
        a.base.script("long", [Hang()])
        flood = [(await a.submit("long", background=True)).json()["id"] for _ in range(3)]
        principal = a.run(flood[0]).principal_id
        await wait_for(lambda: len(a.sandbox.running) == 1 and a.run(flood[2]).queued)
        await wait_for(lambda: _line_states(a.ctx.db, *flood[1:]) == ["own_queue"] * 2)
        for held_back in flood[1:]:
            assert (await b.ctx.engine.state(principal, held_back)).status == "queued"

        _, other_key = a.ctx.db.run(keys.create_key, "other")
        a.base.script("short", answer("done"))
        short = await asyncio.wait_for(
            a.submit("short", headers={"Authorization": f"Bearer {other_key}"}), 10
        )
        assert short.json()["status"] == "completed"
        assert all(a.run(held_back).queued for held_back in flood[1:])  # still behind it

        await a.client.post(f"/v1/responses/{flood[0]}/cancel")  # a's share frees: its next
        await wait_for(lambda: not a.run(flood[1]).queued)
        assert a.run(flood[2]).queued
        for turn in flood[1:]:
            await a.client.post(f"/v1/responses/{turn}/cancel")
