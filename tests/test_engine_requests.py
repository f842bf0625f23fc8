"""The engine request every front door uses (engine/requests.py), in-process with the
stand-in base and sandbox: opening conversations, door session keys, admission control,
and the question policies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storage import door_sessions
from tests.support.fake_engine import CONNECTION, StandInEngine
from tests.support.waiting import wait_for
from uhp_server.engine.requests import (
    ChatMessage,
    EngineTask,
    Question,
    QuestionPolicy,
    SessionKey,
    ToolAnswer,
    ToolCall,
)
from uhp_server.engine.turns.questions import TEXT_INSTRUCTION, TEXT_MARKER
from uhp_server.errors import ApiError
from uhp_server.gateway.user_questions import QUESTION_SERVER, QUESTION_TOOL


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[StandInEngine]:
    # One principal may use both slots: its own turns' order is what these tests look at
    # (sharing between principals: tests/test_admission_fairness.py).
    running = StandInEngine(tmp_path, max_turns=2, keep_seconds=30, per_principal=2)
    yield running
    await running.close()


def task(engine: StandInEngine, text: str, **fields: Any) -> EngineTask:
    fields.setdefault("model_connection", CONNECTION)
    return EngineTask(principal_id=engine.principal_id, harness_id=None, input=text, **fields)


async def until(engine: StandInEngine, response_id: str, status: str, timeout: float = 5):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        state = await engine.engine.state(engine.principal_id, response_id)
        if state.status == status:
            return state
        assert asyncio.get_running_loop().time() < deadline, (state.status, status)
        await asyncio.sleep(0.01)


def text_of(response: dict) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


async def test_opening_conversation_reaches_the_agent_in_order(engine: StandInEngine) -> None:
    opening = (
        ChatMessage("system", "You are terse."),
        ChatMessage("user", "What is in notes.txt?"),
        ChatMessage(
            "assistant", None, tool_calls=(ToolCall("c1", "read_file", '{"path":"notes.txt"}'),)
        ),
        ChatMessage("tool", "milk, eggs", tool_call_id="c1"),
        ChatMessage("assistant", "Milk and eggs."),
    )
    accepted = await engine.engine.start(task(engine, "SAY done", opening=opening))
    state = await until(engine, accepted.response_id, "completed")
    assert text_of(state.response) == "done"
    prompt = engine.base.prompts[0]
    order = ["What is in notes.txt?", "read_file", "milk, eggs", "Milk and eggs.", "SAY done"]
    positions = [prompt.index(part) for part in order]
    assert positions == sorted(positions)
    assert "You are terse." in engine.base.system_prompts[0]
    assert "You are terse." not in prompt


async def test_a_door_session_key_continues_one_uhp_session(engine: StandInEngine) -> None:
    key = SessionKey("oumi-harness", "row-1")
    first = await engine.engine.start(task(engine, "SAY one", session=key))
    one = await until(engine, first.response_id, "completed")
    opening = (ChatMessage("user", "never seen again"),)
    second = await engine.engine.start(task(engine, "SAY two", session=key, opening=opening))
    two = await until(engine, second.response_id, "completed")
    assert two.response["metadata"]["session_id"] == one.response["metadata"]["session_id"]
    assert two.response["previous_response_id"] == first.response_id
    assert "never seen again" not in engine.base.prompts[1]  # only a NEW session's opening
    other = await engine.engine.start(task(engine, "SAY three", session=SessionKey("oumi", "x")))
    three = await until(engine, other.response_id, "completed")
    assert three.response["metadata"]["session_id"] != one.response["metadata"]["session_id"]
    harness_id = one.response["metadata"]["harness_id"]
    stored = engine.db.run(
        door_sessions.find, engine.principal_id, harness_id, "oumi-harness", "row-1"
    )
    assert stored == one.response["metadata"]["session_id"]


async def test_turns_beyond_the_limit_wait_in_order_and_a_cancel_leaves_at_once(
    engine: StandInEngine,
) -> None:
    ids = []
    for n in range(5):
        ids.append((await engine.engine.start(task(engine, f"WAIT g{n}"))).response_id)
    await until(engine, ids[1], "in_progress")
    for queued in ids[2:]:
        await until(engine, queued, "queued")
    assert engine.admission.waiting == 3 and engine.base.running == 2
    # The UHP response stays schema-valid while queued.
    assert (await engine.engine.state(engine.principal_id, ids[3])).response["status"] == (
        "in_progress"
    )
    cancelled = await engine.engine.cancel(engine.principal_id, ids[3])
    assert cancelled.status == "cancelled"
    assert engine.admission.waiting == 2
    # One place frees at a time, each taken before the next frees: the order the waiting
    # turns start in is the order the line admits them, not a race between their set-ups.
    engine.base.gate("g0").set()
    await wait_for(lambda: len(engine.sandbox.started) == 3)
    engine.base.gate("g1").set()
    await wait_for(lambda: len(engine.sandbox.started) == 4)
    for n in range(2, 5):
        engine.base.gate(f"g{n}").set()
    for n in (0, 1, 2, 4):
        await until(engine, ids[n], "completed")
    assert engine.base.most_running == 2
    started = [p.mounts.labels["uhp.response"] for p in engine.sandbox.started]
    assert started == [ids[0], ids[1], ids[2], ids[4]]  # first come, first served


async def test_a_paused_question_is_answered_in_the_same_turn(engine: StandInEngine) -> None:
    accepted = await engine.engine.start(
        task(engine, "ASK Which city?", questions=QuestionPolicy.pause())
    )
    state = await until(engine, accepted.response_id, "input_required")
    (question,) = state.questions
    assert question.text == "Which city?" and question.name == QUESTION_TOOL
    call = state.response["output"][-1]
    assert call["type"] == "function_call" and call["call_id"] == question.call_id
    run = engine.runs.get(accepted.response_id)
    assert run is not None and run.grant.model_paused  # no model connection while paused
    with pytest.raises(ApiError) as wrong:
        await engine.engine.answer(engine.principal_id, accepted.response_id, [])
    assert wrong.value.status == 400
    answers = [ToolAnswer(question.call_id, "Paris")]
    same = await engine.engine.answer(engine.principal_id, accepted.response_id, answers)
    assert same == accepted.response_id
    done = await until(engine, accepted.response_id, "completed")
    assert text_of(done.response) == "answer: Paris"
    outputs = [i for i in done.response["output"] if i["type"] == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [(question.call_id, "Paris")]
    with pytest.raises(ApiError) as again:
        await engine.engine.answer(engine.principal_id, accepted.response_id, answers)
    assert again.value.status == 409


async def test_a_question_kept_too_long_parks_and_a_new_turn_carries_the_answer(
    tmp_path: Path,
) -> None:
    engine = StandInEngine(tmp_path, keep_seconds=0.2)
    try:
        accepted = await engine.engine.start(
            task(engine, "ASK Which city?", questions=QuestionPolicy.pause())
        )
        state = await until(engine, accepted.response_id, "input_required")
        await asyncio.sleep(0.5)
        state = await engine.engine.state(engine.principal_id, accepted.response_id)
        assert state.status == "input_required"
        assert state.response["status"] == "incomplete"
        (question,) = state.questions
        answers = [ToolAnswer(question.call_id, "Lyon")]
        carried = await engine.engine.answer(
            engine.principal_id, accepted.response_id, answers, model_connection=CONNECTION
        )
        assert carried != accepted.response_id
        done = await until(engine, carried, "completed")
        assert "The user's answer: Lyon" in engine.base.prompts[-1]
        assert done.response["previous_response_id"] == accepted.response_id
        # A parked task that is cancelled instead ends cancelled, in a closing turn.
        again = await engine.engine.start(
            task(engine, "ASK Again?", questions=QuestionPolicy.pause())
        )
        await until(engine, again.response_id, "input_required")
        await asyncio.sleep(0.5)
        cancelled = await engine.engine.cancel(engine.principal_id, again.response_id)
        assert cancelled.status == "cancelled"
        assert cancelled.response["previous_response_id"] == again.response_id
        parked = await engine.engine.state(engine.principal_id, again.response_id)
        session = parked.response["metadata"]["session_id"]
        assert cancelled.response["metadata"]["session_id"] == session
    finally:
        await engine.close()


@pytest.mark.parametrize("forgets", [False, True])
async def test_a_parked_answer_repeats_the_request_a_forgetful_cli_took_back(
    tmp_path: Path, forgets: bool
) -> None:
    """A CLI that takes a stopped turn back out of its conversation (Gemini CLI) would see the
    answer without what it was asked about: the new turn quotes the request for it."""
    engine = StandInEngine(tmp_path, keep_seconds=0.2)
    engine.base.forgets_unfinished_turns = forgets
    try:
        request = "Plan my trip.\nASK Which city?"
        accepted = await engine.engine.start(
            task(engine, request, questions=QuestionPolicy.pause())
        )
        await until(engine, accepted.response_id, "input_required")
        await asyncio.sleep(0.5)  # parked
        state = await engine.engine.state(engine.principal_id, accepted.response_id)
        (question,) = state.questions
        answers = [ToolAnswer(question.call_id, "Lyon")]
        carried = await engine.engine.answer(
            engine.principal_id, accepted.response_id, answers, model_connection=CONNECTION
        )
        await until(engine, carried, "completed")
        prompt = engine.base.prompts[-1]
        assert "The user's answer: Lyon" in prompt
        quoted = "> Plan my trip.\n> ASK Which city?"
        assert (quoted in prompt) is forgets
    finally:
        await engine.close()


async def test_recorded_and_held_answers(engine: StandInEngine) -> None:
    recorded = QuestionPolicy.recorded_answers(("first",))
    one = await engine.engine.start(task(engine, "ASK a?", questions=recorded))
    assert text_of((await until(engine, one.response_id, "completed")).response) == "answer: first"

    asked = []

    async def hold(question: Question) -> str:
        asked.append(question.text)
        return "from the hold"

    two = await engine.engine.start(task(engine, "ASK b?", questions=QuestionPolicy.hold(hold)))
    done = await until(engine, two.response_id, "completed")
    assert text_of(done.response) == "answer: from the hold" and asked == ["b?"]

    async def defer(question: Question) -> str | None:
        return None

    three = await engine.engine.start(task(engine, "ASK c?", questions=QuestionPolicy.hold(defer)))
    await until(engine, three.response_id, "input_required")


async def test_the_question_tool_is_offered_only_when_the_policy_is_not_none(
    engine: StandInEngine,
) -> None:
    one = await engine.engine.start(task(engine, "SAY x"))
    await until(engine, one.response_id, "completed")
    two = await engine.engine.start(task(engine, "SAY y", questions=QuestionPolicy.pause()))
    await until(engine, two.response_id, "completed")
    assert QUESTION_SERVER not in engine.base.mcp_names[0]
    assert QUESTION_SERVER in engine.base.mcp_names[1]


async def test_follow_yields_every_event_until_the_terminal_one(engine: StandInEngine) -> None:
    accepted = await engine.engine.start(task(engine, "SAY hi"))
    types = [
        e["type"] async for e in engine.engine.follow(engine.principal_id, accepted.response_id)
    ]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    stored = [e async for e in engine.engine.follow(engine.principal_id, accepted.response_id, 1)]
    assert stored[0]["sequence_number"] == 2
    with pytest.raises(ApiError):
        await engine.engine.state("someone-else", accepted.response_id)


async def test_a_base_without_http_mcp_asks_in_its_final_text(tmp_path: Path) -> None:
    engine = StandInEngine(tmp_path)
    engine.base.mcp_transports = ()
    try:
        ask = f"SAY I need to know.\\n{TEXT_MARKER} Which city?"
        accepted = await engine.engine.start(task(engine, ask, questions=QuestionPolicy.pause()))
        state = await until(engine, accepted.response_id, "input_required")
        (question,) = state.questions
        assert question.text == "Which city?"
        assert TEXT_INSTRUCTION in engine.base.system_prompts[-1]
        assert QUESTION_SERVER not in engine.base.mcp_names[-1]
        carried = await engine.engine.answer(
            engine.principal_id,
            accepted.response_id,
            [ToolAnswer(question.call_id, "Oslo")],
            model_connection=CONNECTION,
        )
        await until(engine, carried, "completed")
        assert "The user's answer: Oslo" in engine.base.prompts[-1]
    finally:
        await engine.close()


async def test_a_question_asked_in_the_final_text_reaches_a_door_that_holds_questions(
    tmp_path: Path,
) -> None:
    engine = StandInEngine(tmp_path)
    engine.base.mcp_transports = ()
    held: list[str] = []

    async def open_a_hold(question: Question) -> str | None:
        held.append(question.text)
        return None  # the door answers later (AgentOS: a hold on the platform)

    try:
        ask = f"SAY I need to know.\\n{TEXT_MARKER} Which city?"
        policy = QuestionPolicy.hold(open_a_hold)
        accepted = await engine.engine.start(task(engine, ask, questions=policy))
        state = await until(engine, accepted.response_id, "input_required")
        assert held == ["Which city?"]
        assert [q.text for q in state.questions] == ["Which city?"]
    finally:
        await engine.close()


async def test_a_base_asking_through_its_own_tool_gets_no_text_fallback(tmp_path: Path) -> None:
    engine = StandInEngine(tmp_path)
    engine.base.mcp_transports = ()
    engine.base.asks_natively = True  # e.g. Gemini CLI's own ask_user
    try:
        said = f"SAY I need to know.\\n{TEXT_MARKER} Which city?"
        accepted = await engine.engine.start(task(engine, said, questions=QuestionPolicy.pause()))
        await until(engine, accepted.response_id, "completed")  # a marker line is just text
        assert TEXT_INSTRUCTION not in engine.base.system_prompts[-1]
        assert QUESTION_SERVER not in engine.base.mcp_names[-1]
    finally:
        await engine.close()


async def test_a_base_asking_through_its_own_tool_gets_no_question_mcp_server(
    tmp_path: Path,
) -> None:
    engine = StandInEngine(tmp_path)
    engine.base.mcp_transports = ("http", "sse")  # it takes MCP servers (Gemini CLI)
    engine.base.asks_natively = True  # and asks through its own tool: one way to ask
    try:
        accepted = await engine.engine.start(
            task(engine, "SAY fine", questions=QuestionPolicy.pause())
        )
        await until(engine, accepted.response_id, "completed")
        assert QUESTION_SERVER not in engine.base.mcp_names[-1]
        assert TEXT_INSTRUCTION not in engine.base.system_prompts[-1]
    finally:
        await engine.close()
