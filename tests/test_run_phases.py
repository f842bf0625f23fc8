"""A run's life as a state machine (engine/turns/run.py): the phases it may pass through, in the
only orders allowed, and how the strongest request to stop it decides how it ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.fake_engine import StandInEngine
from tests.test_engine_requests import task, until
from uhp_server.engine.requests import Question
from uhp_server.engine.turns.run import Run, RunPhase, StopReason, WrongTransition


def bare_run() -> Run:
    """A run with nothing to run (its phases and stops need no plan, log or builder)."""
    return Run("resp_1", "prin_1", "sess_1", plan=None, log=None, builder=None)  # type: ignore[arg-type]  # none is read


@pytest.mark.parametrize(
    "path",
    [
        [RunPhase.QUEUED, RunPhase.RUNNING, RunPhase.ENDING, RunPhase.ENDED],
        [RunPhase.RUNNING, RunPhase.ENDING, RunPhase.ENDED],
        [RunPhase.QUEUED, RunPhase.ENDING, RunPhase.ENDED],  # cancelled in the line
        [RunPhase.ENDING, RunPhase.ENDED],  # stopped, or failed, before it ran
    ],
)
def test_a_run_goes_forward_only_along_its_phases(path: list[RunPhase]) -> None:
    run = bare_run()
    assert run.phase is RunPhase.ACCEPTED
    for phase in path:
        run.enter(phase)
        assert run.phase is phase
    assert run.stopped.is_set()  # ended: its process is gone


@pytest.mark.parametrize(
    ("before", "wrong"),
    [
        ([], RunPhase.ENDED),  # never ended without ending
        ([RunPhase.RUNNING], RunPhase.QUEUED),  # never back in the line
        ([RunPhase.RUNNING, RunPhase.ENDING], RunPhase.RUNNING),
        ([RunPhase.ENDING, RunPhase.ENDED], RunPhase.ENDING),
    ],
)
def test_a_phase_that_cannot_follow_is_refused(before: list[RunPhase], wrong: RunPhase) -> None:
    run = bare_run()
    for phase in before:
        run.enter(phase)
    with pytest.raises(WrongTransition):
        run.enter(wrong)
    assert run.phase is (before[-1] if before else RunPhase.ACCEPTED)


def test_the_strongest_stop_decides_how_the_turn_ends() -> None:
    run = bare_run()
    run.asking.append(Question("call_1", "ask_user", "{}", "Which?", ()))
    run.park()
    assert run.parking and not run.cut_short
    parked = run.stopped_outcome()
    assert parked.status == "incomplete"
    assert parked.incomplete_details == {
        "reason": "input_required",
        "pending_call_ids": ["call_1"],
    }
    run.request_stop(StopReason.CANCEL)  # a cancel came before the turn saw the park
    assert run.cut_short and run.stopped_outcome().status == "cancelled"
    deadline = {"reason": "timeout_seconds", "timeout_seconds": 5}
    run.request_stop(StopReason.TIME_OUT, deadline)
    assert run.stopped_outcome().incomplete_details == deadline
    run.request_stop(StopReason.CANCEL)  # weaker than the deadline: changes nothing
    assert run.stopped_outcome().status == "incomplete"
    run.request_stop(StopReason.ABANDON)
    let_go = run.stopped_outcome()
    assert (let_go.status, let_go.code, run.abandoned) == ("failed", "harness_error", True)


async def test_a_turn_passes_through_its_phases_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, list[RunPhase]] = {}
    enter = Run.enter

    def recording(run: Run, phase: RunPhase) -> None:
        seen.setdefault(run.response_id, []).append(phase)
        enter(run, phase)

    monkeypatch.setattr(Run, "enter", recording)
    engine = StandInEngine(tmp_path, max_turns=1)
    try:
        first = await engine.engine.start(task(engine, "WAIT first"))
        await until(engine, first.response_id, "in_progress")
        second = await engine.engine.start(task(engine, "SAY second"))
        await until(engine, second.response_id, "queued")
        engine.base.gate("first").set()
        for accepted in (first, second):
            await until(engine, accepted.response_id, "completed")
            run = engine.runs.get(accepted.response_id)
            assert run is not None
            await asyncio.wait_for(run.stopped.wait(), 5)
        queued = [RunPhase.QUEUED, RunPhase.RUNNING, RunPhase.ENDING, RunPhase.ENDED]
        assert seen[first.response_id] == queued  # a slot, taken at once
        assert seen[second.response_id] == queued  # waited in the line for it
    finally:
        await engine.close()
