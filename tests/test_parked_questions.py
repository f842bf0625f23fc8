"""Review findings on paused questions (the engine on its stand-ins):

- A CLI that takes a stopped turn back out of its conversation (`forgets_unfinished_turns`:
  Gemini CLI) also forgets the answers the user gave earlier in that turn. When the turn asks
  twice and parks on the second question, the new turn carrying the second answer quotes the
  request but not the first answer, which the server stored (a function_call_output of the
  parked response): the agent asks the user again.
- Overlapping cancels of one parked task each withdraw it again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import Process, TurnSpec
from harness_bases.turns import AgentTurn
from tests.support.fake_engine import CONNECTION, StandInBase, StandInEngine
from tests.test_engine_requests import task, until
from uhp_server.engine.requests import QuestionPolicy, ToolAnswer
from uhp_server.errors import ApiError


class TwoQuestions(AgentTurn):
    """Asks "Which city?", then "Which month?" (parked there when nobody answers in time)."""

    def __init__(self, base: StandInBase, spec: TurnSpec) -> None:
        super().__init__()
        self.base, self.spec = base, spec

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        self.base.prompts.append(self.spec.prompt)
        yield ev.NativeSession(f"native-{len(self.base.prompts)}")
        if self.spec.prompt.strip().splitlines()[-1] == "ASK TWICE":
            assert self.base.runs is not None
            run = self.base.runs.by_token(self.spec.gateway_token)
            assert run is not None
            for question in ("Which city?", "Which month?"):
                if await self.base.runs.ask(run, question, ()) is None:
                    await asyncio.Event().wait()  # parked: the engine ends the turn
        yield ev.TextDelta("m1", "done")
        yield ev.TextDone("m1", "done")
        yield ev.TurnFinished()

    async def send_interrupt(self) -> bool:
        return True


async def test_a_forgetful_clis_earlier_answers_reach_the_turn_that_carries_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = StandInEngine(tmp_path, keep_seconds=0.3)
    engine.base.forgets_unfinished_turns = True

    def start_turn(proc: Process, turn: TurnSpec) -> AgentTurn:
        return TwoQuestions(engine.base, turn)

    monkeypatch.setattr(engine.base, "start_turn", start_turn)
    try:
        request = "Plan my trip.\nASK TWICE"
        accepted = await engine.engine.start(
            task(engine, request, questions=QuestionPolicy.pause())
        )
        first = await until(engine, accepted.response_id, "input_required")
        (city,) = first.questions
        await engine.engine.answer(
            engine.principal_id, accepted.response_id, [ToolAnswer(city.call_id, "Lyon")]
        )

        async def second_question() -> None:
            while True:
                state = await engine.engine.state(engine.principal_id, accepted.response_id)
                if state.status == "input_required" and state.questions[0].text == "Which month?":
                    return
                await asyncio.sleep(0.01)

        await asyncio.wait_for(second_question(), 5)
        await asyncio.sleep(0.6)  # parked: the process is gone
        state = await engine.engine.state(engine.principal_id, accepted.response_id)
        assert state.response["status"] == "incomplete"
        (month,) = state.questions
        carried = await engine.engine.answer(
            engine.principal_id,
            accepted.response_id,
            [ToolAnswer(month.call_id, "May")],
            model_connection=CONNECTION,
        )
        await until(engine, carried, "completed")
        prompt = engine.base.prompts[-1]
        assert "> Plan my trip." in prompt and "May" in prompt
        assert "Lyon" in prompt, prompt
    finally:
        await engine.close()


async def test_concurrent_cancels_of_a_parked_task_withdraw_it_once(tmp_path: Path) -> None:
    """Sessions §4: cancelling an already-terminal task changes nothing, and a client retries
    a cancel after a dropped connection (through a balancer: on another replica). Cancels of a
    parked task that overlap each write their own closing `cancelled` turn (withdrawal.py
    inserts one without claiming the session), so the conversation grows one per cancel and
    each caller is told a different response id ended it."""
    engine = StandInEngine(tmp_path, keep_seconds=0.2)
    try:
        accepted = await engine.engine.start(
            task(engine, "ASK x?", questions=QuestionPolicy.pause())
        )
        await until(engine, accepted.response_id, "input_required")
        await asyncio.sleep(0.5)  # parked
        states = await asyncio.gather(
            *(engine.engine.cancel(engine.principal_id, accepted.response_id) for _ in range(3))
        )
        assert {state.status for state in states} == {"cancelled"}
        statement = "SELECT id FROM response WHERE previous_response_id = :id"
        closing = engine.db.run(lambda tx: tx.rows(statement, {"id": accepted.response_id}))
        closing_ids = [row[0] for row in closing]
        assert len(closing_ids) == 1, closing_ids
        assert {state.response["id"] for state in states} == set(closing_ids)
    finally:
        await engine.close()


async def _parked_unkept(engine: StandInEngine) -> str:
    accepted = await engine.engine.start(
        task(engine, "ASK x?", questions=QuestionPolicy.pause(), store=False)
    )
    await until(engine, accepted.response_id, "input_required")
    await asyncio.sleep(0.5)  # parked
    return accepted.response_id


async def test_cancelling_an_unkept_parked_task_answers_cancelled(tmp_path: Path) -> None:
    """Sessions §4: a cancel of a task waiting on its questions ends it `cancelled`, kept or
    not (the closing turn has no run to read and, unkept, no stored form)."""
    engine = StandInEngine(tmp_path, keep_seconds=0.2)
    try:
        parked = await _parked_unkept(engine)
        state = await engine.engine.cancel(engine.principal_id, parked)
        assert state.status == "cancelled"
    finally:
        await engine.close()


async def test_withdrawing_an_unkept_parked_task_records_its_closing_turns_end(
    tmp_path: Path,
) -> None:
    """An unkept (store: false) response keeps no content, but its end is recorded (its
    status and finished_at: session_listing.record_status) so histories list it as finished
    and no sweep or restart ends it again as `failed`. The closing `cancelled` turn of a
    withdrawn unkept task is an unkept response too."""
    engine = StandInEngine(tmp_path, keep_seconds=0.2)
    try:
        parked = await _parked_unkept(engine)
        with contextlib.suppress(ApiError):  # (the cancel's own answer: the test above)
            await engine.engine.cancel(engine.principal_id, parked)
        statement = "SELECT status FROM response WHERE previous_response_id = :id"
        closing = engine.db.run(lambda tx: tx.rows(statement, {"id": parked}))
        assert [row[0] for row in closing] == ["cancelled"]
    finally:
        await engine.close()


async def test_a_parked_task_answered_twice_carries_on_once_and_refuses_other_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same answers again (a door's retry) are given the new turn the first started;
    other answers (found in review: dropped in silence, 200 with the first's turn) are
    refused, as a task no longer waiting for an answer."""
    engine = StandInEngine(tmp_path, keep_seconds=0.3)

    def start_turn(proc: Process, turn: TurnSpec) -> AgentTurn:
        return TwoQuestions(engine.base, turn)

    monkeypatch.setattr(engine.base, "start_turn", start_turn)
    try:
        accepted = await engine.engine.start(
            task(engine, "Plan my trip.\nASK TWICE", questions=QuestionPolicy.pause())
        )
        await until(engine, accepted.response_id, "input_required")
        await asyncio.sleep(0.6)  # parked: the process is gone
        (city,) = (await engine.engine.state(engine.principal_id, accepted.response_id)).questions

        async def answering(city_name: str) -> str:
            return await engine.engine.answer(
                engine.principal_id,
                accepted.response_id,
                [ToolAnswer(city.call_id, city_name)],
                model_connection=CONNECTION,
            )

        first = await answering("Lyon")
        assert await answering("Lyon") == first
        with pytest.raises(ApiError) as refused:
            await answering("Paris")
        assert (refused.value.status, refused.value.code) == (409, "not_waiting")
    finally:
        await engine.close()
