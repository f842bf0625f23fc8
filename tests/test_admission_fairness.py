"""Turn slots shared fairly between principals (engine/turns/admission.py): a share per
principal, round-robin between principals, each principal's turns in arrival order, a
cancelled waiter out of the line at once, and each waiter's place in line. Then the same
through the engine: one principal's flood does not hold another's short task back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import keys
from tests.support.fake_engine import CONNECTION, StandInEngine
from tests.support.waiting import wait_for
from uhp_server.engine.reading.read_back import QUEUE_POSITION
from uhp_server.engine.requests import EngineTask
from uhp_server.engine.turns.admission import AdmissionQueue, share_per_principal


class Line:
    """An AdmissionQueue driven by hand: turns named `<principal><n>` (a1 is a's)."""

    def __init__(self, limit: int, per_principal: int | None = None) -> None:
        self.queue = AdmissionQueue(limit, per_principal)
        self.admitted: list[str] = []
        self.waits: dict[str, asyncio.Task[None]] = {}

    async def arrive(self, *turns: str) -> None:
        for turn in turns:
            self.waits[turn] = asyncio.ensure_future(self._take(turn))
            await asyncio.sleep(0)  # each reaches the line before the next: arrival order

    async def _take(self, turn: str) -> None:
        await self.queue.acquire(turn, turn[0])
        self.admitted.append(turn)

    async def end(self, turn: str) -> None:
        self.queue.release(turn)
        await asyncio.sleep(0)  # the turns let in take their slots

    def waiting(self) -> list[str]:
        return [turn for turn, wait in self.waits.items() if not wait.done()]


def test_by_default_one_principal_leaves_a_slot_to_the_others() -> None:
    assert share_per_principal(4, None) == 3
    assert share_per_principal(2, None) == 1
    assert share_per_principal(1, None) == 1  # the one slot: nothing can be left over
    assert share_per_principal(4, 4) == 4  # a single-tenant server may give it everything
    assert share_per_principal(4, 9) == 4


async def test_a_principal_at_its_share_waits_while_a_slot_is_free_for_another() -> None:
    line = Line(limit=3, per_principal=2)
    await line.arrive("a1", "a2", "a3")
    assert line.admitted == ["a1", "a2"]  # a3 waits, though one slot is free
    assert line.queue.running == 2 and line.queue.waiting == 1
    await line.arrive("b1")
    assert line.admitted == ["a1", "a2", "b1"]  # b1 takes it at once
    await line.end("a1")
    assert line.admitted[-1] == "a3"


async def test_free_slots_go_round_robin_between_principals_each_in_its_own_order() -> None:
    line = Line(limit=1)
    await line.arrive("a0", "a1", "a2", "a3", "b1", "b2", "c1")
    assert line.admitted == ["a0"]
    for turn in ("a0", "b1", "c1", "a1", "b2", "a2"):
        await line.end(turn)
    assert line.admitted == ["a0", "b1", "c1", "a1", "b2", "a2", "a3"]


async def test_a_free_slot_goes_to_the_principal_holding_the_fewest() -> None:
    line = Line(limit=4, per_principal=4)
    await line.arrive("a1", "a2", "a3", "a4", "a5", "a6", "b1")
    assert line.waiting() == ["a5", "a6", "b1"]
    await line.end("a1")
    assert line.admitted[-1] == "b1"  # though a5 and a6 came first: a still holds three


async def test_a_cancelled_waiter_leaves_the_line_at_once() -> None:
    line = Line(limit=1)
    await line.arrive("a0", "a1", "b1", "b2")
    line.waits["b1"].cancel()
    await asyncio.sleep(0)
    assert line.queue.waiting == 2
    assert line.queue.position("b1") is None
    assert line.queue.position("b2") == 1
    await line.end("a0")
    assert line.admitted == ["a0", "b2"]
    await line.end("b2")
    assert line.admitted == ["a0", "b2", "a1"]
    assert line.queue.running == 1 and line.queue.waiting == 0


async def test_a_waiter_granted_as_it_was_cancelled_passes_its_slot_on() -> None:
    line = Line(limit=1)
    await line.arrive("a0", "b1", "c1")
    line.queue.release("a0")  # b1 is granted the slot ...
    line.waits["b1"].cancel()  # ... and cancelled before it could run
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert line.admitted == ["a0", "c1"]
    assert line.queue.running == 1


async def test_each_waiter_knows_its_place_in_the_order_it_will_be_served() -> None:
    line = Line(limit=1)
    await line.arrive("a0", "a1", "a2", "a3", "b1", "b2", "c1")
    places = {turn: line.queue.position(turn) for turn in line.waiting()}
    assert places == {"b1": 1, "c1": 2, "a1": 3, "b2": 4, "a2": 5, "a3": 6}
    assert line.queue.position("a0") is None  # running, not waiting
    for turn in ("a0", "b1", "c1", "a1", "b2", "a2"):  # and it is served so
        await line.end(turn)
    assert line.admitted == ["a0", "b1", "c1", "a1", "b2", "a2", "a3"]


# -- through the engine ---------------------------------------------------------------------
@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[StandInEngine]:
    running = StandInEngine(tmp_path, max_turns=3)  # a share of 2 per principal by default
    yield running
    await running.close()


def _task(principal_id: str, text: str) -> EngineTask:
    return EngineTask(
        principal_id=principal_id,
        harness_id=None,
        input=text,
        model_connection=CONNECTION,
        background=True,
    )


async def _status(engine: StandInEngine, principal_id: str, response_id: str) -> str:
    return (await engine.engine.state(principal_id, response_id)).status


def _started(engine: StandInEngine) -> list[str]:
    return [p.mounts.labels["uhp.response"] for p in engine.sandbox.started]


def _first_two_then(engine: StandInEngine, first_two: list[str]) -> list[str]:
    """The turns started after ``first_two``, checked to be the first two started (in either
    order: two turns admitted together reach their sandbox in whichever order the loop runs
    them, which on a loaded machine is not always the order they were admitted in)."""
    started = _started(engine)
    assert set(started[:2]) == set(first_two)
    return started[2:]


async def test_a_short_task_behind_another_principals_flood_runs_at_once(
    engine: StandInEngine,
) -> None:
    a = engine.principal_id
    b = engine.db.run(keys.ensure_principal, "b").id
    flood = [(await engine.engine.start(_task(a, f"WAIT a{n}"))).response_id for n in range(6)]
    await wait_for(lambda: engine.base.running == 2)
    await wait_for(lambda: engine.admission.waiting == 4)
    for queued in flood[2:]:
        assert await _status(engine, a, queued) == "queued"
    short = (await engine.engine.start(_task(b, "SAY done"))).response_id
    await wait_for(lambda: _is(engine, b, short, "completed"))
    # Not one of the flood's turns ended or started meanwhile: b was served first.
    assert _first_two_then(engine, flood[:2]) == [short]
    for queued in flood[2:]:
        assert await _status(engine, a, queued) == "queued"


async def _is(engine: StandInEngine, principal_id: str, response_id: str, status: str) -> bool:
    return await _status(engine, principal_id, response_id) == status


async def test_a_queued_task_of_another_principal_is_served_before_the_floods_queued_ones(
    tmp_path: Path,
) -> None:
    engine = StandInEngine(tmp_path, max_turns=2, per_principal=2)  # no slot held back
    try:
        a = engine.principal_id
        b = engine.db.run(keys.ensure_principal, "b").id
        flood = [(await engine.engine.start(_task(a, f"WAIT a{n}"))).response_id for n in range(5)]
        await wait_for(lambda: engine.base.running == 2)
        await wait_for(lambda: engine.admission.waiting == 3)
        short = (await engine.engine.start(_task(b, "SAY done"))).response_id
        await wait_for(lambda: engine.admission.waiting == 4)
        # b's task is the next to start, though three of a's came before it.
        state = await engine.engine.state(b, short)
        assert state.status == "queued"
        assert state.response["status"] == "in_progress"  # the protocol's status, unchanged
        assert state.response["metadata"][QUEUE_POSITION] == 1
        after = (await engine.engine.state(a, flood[2])).response["metadata"][QUEUE_POSITION]
        assert after == 2
        engine.base.gate("a0").set()
        await wait_for(lambda: _is(engine, b, short, "completed"))
        assert _first_two_then(engine, flood[:2])[:1] == [short]
    finally:
        await engine.close()
