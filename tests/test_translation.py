"""The translator and the fold: the stream, the blocking answer and the read-back agree."""

from __future__ import annotations

import asyncio

import pytest

from harness_bases import events as ev
from storage import responses as response_store
from storage.db import Database
from tests.support.schema import check_stream, validate
from uhp_server.engine.reading.fold import fold
from uhp_server.engine.requests import TaskStatus
from uhp_server.engine.turns.builder import ResponseBuilder
from uhp_server.engine.turns.eventlog import EventLog


def _initial() -> dict:
    return {
        "id": "resp_test",
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
        "metadata": {"session_id": "hsess1"},
    }


AGENT_RUN: list[ev.AgentEvent] = [
    ev.NativeSession("thread-1"),
    ev.ReasoningDelta("r1", "Plan"),
    ev.ReasoningDelta("r1", "ning"),
    ev.ReasoningDone("r1", "Planning"),
    ev.ToolCallStarted("c1", "shell", '{"command": "ls"}'),
    ev.ToolCallFinished("c1", "README.md\n"),
    ev.TextDelta("m1", "Hel"),
    ev.TextDelta("m1", "lo"),
    ev.TextDone("m1", "Hello"),
]


def _run(
    builder: ResponseBuilder,
    agent_events: list[ev.AgentEvent],
    status: TaskStatus = TaskStatus.COMPLETED,
) -> list[dict]:
    out = builder.created() + builder.in_progress()
    for agent_event in agent_events:
        out += builder.apply(agent_event)
    out += builder.finish(status, usage={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5})
    return [{**e, "sequence_number": i} for i, e in enumerate(out)]


def test_a_full_run_is_a_valid_stream_and_folds_to_its_terminal_response() -> None:
    events = _run(ResponseBuilder(_initial()), AGENT_RUN)
    final = check_stream(events)
    assert [item["type"] for item in final["output"]] == [
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert final["output"][3]["content"][0]["text"] == "Hello"
    assert final["output"][0]["summary"][0]["text"] == "Planning"
    assert final["output"][1]["call_id"] == final["output"][2]["call_id"]
    assert fold(events) == final
    # Every prefix folds to a valid response too (a read-back while the task runs).
    for cut in range(2, len(events)):
        validate("Response", fold(events[:cut]))


def test_fold_of_a_partial_stream_has_the_text_so_far() -> None:
    events = _run(ResponseBuilder(_initial()), AGENT_RUN)
    deltas = [i for i, e in enumerate(events) if e["type"] == "response.output_text.delta"]
    partial = fold(events[: deltas[0] + 1])
    assert partial["status"] == "in_progress"
    assert partial["output"][-1]["content"][0]["text"] == "Hel"


def test_cut_short_turn_closes_open_items_as_incomplete_and_keeps_partial_text() -> None:
    events = _run(ResponseBuilder(_initial()), [ev.TextDelta("m", "partial")], TaskStatus.CANCELLED)
    final = check_stream(events)
    assert events[-1]["type"] == "response.failed"  # Streaming §4: cancelled ends this way
    assert final["status"] == "cancelled"
    assert final["output"][0]["status"] == "incomplete"
    assert final["output"][0]["content"][0]["text"] == "partial"


def test_final_text_that_extends_the_deltas_is_sent_as_a_delta() -> None:
    builder = ResponseBuilder(_initial())
    builder.created()
    out = builder.apply(ev.TextDelta("m", "ab")) + builder.apply(ev.TextDone("m", "abcd"))
    deltas = [e["delta"] for e in out if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "abcd"


def test_notice_is_a_visible_message() -> None:
    events = _run(ResponseBuilder(_initial()), [ev.Notice("could not resume")])
    final = check_stream(events)
    assert final["output"][0]["content"][0]["text"] == "could not resume"


def test_tool_output_for_an_unknown_call_is_dropped() -> None:
    builder = ResponseBuilder(_initial())
    assert builder.apply(ev.ToolCallFinished("nope", "x")) == []


@pytest.mark.asyncio
async def test_event_log_persists_before_publishing_and_replays_from_any_point(tmp_path) -> None:
    db = Database(tmp_path / "db.sqlite3")
    log = EventLog(db, "resp_test", persist=True)
    builder = ResponseBuilder(_initial())
    seen: list[dict] = []

    async def follower() -> None:
        async for event in log.follow():
            # Anything a subscriber sees is already in the database.
            stored = db.run(response_store.events_after, "resp_test", event["sequence_number"] - 1)
            assert stored and stored[0] == event
            seen.append(event)

    task = asyncio.create_task(follower())
    await log.append(builder.created())
    for agent_event in AGENT_RUN:
        await log.append(builder.apply(agent_event))
        await asyncio.sleep(0)
    await log.append(builder.finish(TaskStatus.COMPLETED))
    await asyncio.wait_for(task, 5)
    assert seen == log.events
    stored = db.run(response_store.events_after, "resp_test")
    assert stored == log.events
    assert [e["sequence_number"] for e in stored] == list(range(len(stored)))
    tail = [e async for e in log.follow(after=len(stored) - 3)]
    assert tail == stored[-2:]
    with pytest.raises(RuntimeError):
        await log.append(builder.created())
