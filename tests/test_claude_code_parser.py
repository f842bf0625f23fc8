"""The Claude Code stream-json parser, on real output captured from live runs of the pinned
CLI (harness_bases/claude_code/fixtures, rewritten by UHP_CAPTURE_CLAUDE_CODE_FIXTURES=1
pytest tests/test_claude_code_base.py) and on small hand-made messages for edges the runs
never hit."""

from __future__ import annotations

import json
from pathlib import Path

from harness_bases import events as ev
from harness_bases.claude_code.parser import ClaudeParser

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "claude_code" / "fixtures"


def messages(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]


def replay(name: str, interrupted: bool = False) -> tuple[list[ev.AgentEvent], ClaudeParser]:
    parser = ClaudeParser(interrupt_requested=interrupted)
    events = [e for m in messages(name) for e in parser.feed(m)]
    return events + parser.at_eof(), parser


def of(events: list[ev.AgentEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def test_text_fixture() -> None:
    events, parser = replay("text")
    init = messages("text")[0]
    assert events[0] == ev.NativeSession(init["session_id"])
    deltas = of(events, ev.TextDelta)
    (done,) = of(events, ev.TextDone)
    assert len(deltas) > 1
    assert {d.item for d in deltas} == {done.item}
    assert "".join(d.delta for d in deltas) == done.text == "hello world, this is streamed"
    (usage,) = of(events, ev.Usage)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert isinstance(events[-1], ev.TurnFinished) and parser.finished


def test_tool_call_fixture() -> None:
    events, _ = replay("tool_call")
    kinds = [type(e) for e in events]
    assert kinds.index(ev.ToolCallStarted) < kinds.index(ev.ToolCallFinished)
    assert kinds.index(ev.ToolCallFinished) < kinds.index(ev.TextDone)
    (started,) = of(events, ev.ToolCallStarted)
    (finished,) = of(events, ev.ToolCallFinished)
    assert started.name == "Bash"
    assert json.loads(started.arguments) == {"command": "echo hi"}
    assert finished == ev.ToolCallFinished(started.call, "hi", True)
    assert of(events, ev.TextDone)[0].text == "got hi"
    # The tool call's input_json deltas are not text.
    assert "".join(d.delta for d in of(events, ev.TextDelta)) == "got hi"
    assert isinstance(events[-1], ev.TurnFinished)


def test_thinking_fixture() -> None:
    events, _ = replay("thinking")
    deltas = of(events, ev.ReasoningDelta)
    (done,) = of(events, ev.ReasoningDone)
    assert len(deltas) > 1 and "".join(d.delta for d in deltas) == done.text
    assert done.text == "plan the work carefully"
    (text,) = of(events, ev.TextDone)
    assert text.text == "x" and text.item != done.item
    kinds = [type(e) for e in events]
    assert kinds.index(ev.ReasoningDone) < kinds.index(ev.TextDelta)


def test_resume_fixture_reports_the_same_session_and_its_own_usage() -> None:
    events, _ = replay("resume")
    init = messages("resume")[0]
    assert events[0] == ev.NativeSession(init["session_id"])
    assert of(events, ev.TextDone)[0].text == "you said apple"
    result = messages("resume")[-1]
    (usage,) = of(events, ev.Usage)
    assert usage.input_tokens == result["usage"]["input_tokens"] + result["usage"].get(
        "cache_read_input_tokens", 0
    ) + result["usage"].get("cache_creation_input_tokens", 0)


def test_provider_failure_fixture() -> None:
    events, _ = replay("provider_failure")
    # The CLI's "API Error: 400 bad" note is the failure, not an answer.
    assert not of(events, ev.TextDone) and not of(events, ev.TextDelta)
    assert events[-1] == ev.TurnFailed("bad", "provider_error")


def test_interrupted_fixture_keeps_the_partial_text_and_reports_no_outcome() -> None:
    events, parser = replay("interrupted", interrupted=True)
    (done,) = of(events, ev.TextDone)
    assert done.text.startswith("word")
    assert "".join(d.delta for d in of(events, ev.TextDelta)) == done.text
    assert not [e for e in events if isinstance(e, ev.TurnFinished | ev.TurnFailed)]
    assert parser.finished


def test_the_same_result_without_our_interrupt_is_a_failure() -> None:
    events, _ = replay("interrupted", interrupted=False)
    assert events[-1] == ev.TurnFailed("The agent reported a failure.", "harness_error")


def test_max_turns_fixture_is_the_step_budget() -> None:
    events, _ = replay("max_turns")
    assert len(of(events, ev.ToolCallStarted)) == len(of(events, ev.ToolCallFinished)) == 3
    assert all(f.ok for f in of(events, ev.ToolCallFinished))
    assert isinstance(events[-1], ev.StepBudgetReached)


def test_denied_fixture_is_a_refused_call() -> None:
    events, _ = replay("denied")
    (started,) = of(events, ev.ToolCallStarted)
    (finished,) = of(events, ev.ToolCallFinished)
    assert started.name == "Bash" and finished.call == started.call
    assert not finished.ok and "Bash is disabled" in finished.output
    assert isinstance(events[-1], ev.TurnFinished)


def test_mcp_failed_fixture_is_a_notice() -> None:
    events, _ = replay("mcp_failed")
    assert ev.Notice("The MCP server vault could not be started.") in events
    assert of(events, ev.TextDone)[0].text == "still fine"


def test_eof_before_result() -> None:
    msgs = messages("text")
    cut = next(i for i, m in enumerate(msgs) if m["type"] == "assistant")
    parser = ClaudeParser()
    events = [e for m in msgs[:cut] for e in parser.feed(m)]
    events += parser.at_eof()
    # The text streamed so far is closed, then the turn fails.
    assert isinstance(events[-2], ev.TextDone)
    assert events[-1] == ev.TurnFailed("the agent exited unexpectedly", "harness_error")


# -- hand-made edges ----------------------------------------------------------------------------


def test_sub_agent_messages_are_left_out() -> None:
    parser = ClaudeParser()
    inner = {
        "type": "assistant",
        "parent_tool_use_id": "toolu_outer",
        "message": {"id": "m9", "content": [{"type": "text", "text": "inner"}]},
    }
    assert parser.feed(inner) == []


def test_whole_messages_without_partial_deltas_still_stream_once() -> None:
    parser = ClaudeParser()
    msg = {
        "type": "assistant",
        "message": {"id": "m1", "content": [{"type": "text", "text": "hi"}]},
    }
    assert parser.feed(msg) == [ev.TextDelta("u1", "hi"), ev.TextDone("u1", "hi")]


def test_a_tool_result_with_parts_and_an_error() -> None:
    parser = ClaudeParser()
    parser.feed(
        {
            "type": "assistant",
            "message": {"id": "m1", "content": [{"type": "tool_use", "id": "t1", "name": "X"}]},
        }
    )
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "is_error": True,
        "content": [{"type": "text", "text": "a"}, {"type": "image", "source": {}}],
    }
    (finished,) = parser.feed({"type": "user", "message": {"content": [result]}})
    assert finished == ev.ToolCallFinished("t1", 'a\n{"type": "image", "source": {}}', False)
    # A result for a call this parser never saw start is not ours.
    assert parser.feed({"type": "user", "message": {"content": [result]}}) == []


def test_server_error_result_names_no_host() -> None:
    parser = ClaudeParser()
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "terminal_reason": "api_error",
        "api_error_status": 529,
        "result": "API Error: 529 Overloaded. This is a server-side issue, usually temporary — "
        "try again in a moment. If it persists, check your inference gateway (10.0.0.5:8080).",
    }
    assert parser.feed(result) == [ev.TurnFailed("Overloaded", "provider_error")]


def test_other_execution_errors_are_harness_errors() -> None:
    parser = ClaudeParser()
    result = {"type": "result", "subtype": "error_during_execution", "is_error": True}
    assert parser.feed(result) == [ev.TurnFailed("The agent reported a failure.", "harness_error")]
    assert parser.feed(result) == []  # one outcome only


def test_a_compact_boundary_reports_the_compaction() -> None:
    """The pinned CLI's `system` message after it compacted (`/compact` or on its own)."""
    parser = ClaudeParser()
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "session_id": "s",
        "compact_metadata": {"trigger": "manual", "pre_tokens": 12000},
    }
    assert parser.feed(boundary) == [ev.ConversationCompacted()]
    assert parser.feed({"type": "system", "subtype": "status", "session_id": "s"}) == []
