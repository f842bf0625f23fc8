"""The Pi RPC parser, on real output captured from live runs of the pinned CLI
(harness_bases/pi/fixtures, rewritten by UHP_CAPTURE_PI_FIXTURES=1 pytest
tests/test_pi_base.py) and on small hand-made messages for edges the runs never hit."""

from __future__ import annotations

import json
from pathlib import Path

from harness_bases import events as ev
from harness_bases.pi.parser import EXITED, PROMPT_ID, PROMPT_REFUSED, PiParser

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "pi" / "fixtures"


def messages(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]


def replay(name: str, interrupted: bool = False) -> list[ev.AgentEvent]:
    parser = PiParser(interrupt_requested=interrupted)
    events = [e for m in messages(name) for e in parser.feed(m)]
    return events + parser.at_eof()


def of(events: list[ev.AgentEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def state_session(name: str) -> str:
    (state,) = [m for m in messages(name) if m.get("command") == "get_state"]
    return state["data"]["sessionId"]


def test_text_fixture() -> None:
    events = replay("text")
    assert events[0] == ev.NativeSession(state_session("text"))
    deltas = of(events, ev.TextDelta)
    (done,) = of(events, ev.TextDone)
    assert len(deltas) > 1 and {d.item for d in deltas} == {done.item}
    assert "".join(d.delta for d in deltas) == done.text == "hello world, this is streamed"
    (usage,) = of(events, ev.Usage)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert events[-1] == ev.TurnFinished()


def test_tool_call_fixture() -> None:
    events = replay("tool_call")
    (started,) = of(events, ev.ToolCallStarted)
    (finished,) = of(events, ev.ToolCallFinished)
    assert (started.name, json.loads(started.arguments)) == ("bash", {"command": "echo hi"})
    assert finished == ev.ToolCallFinished(started.call, "hi\n", True)
    assert "".join(e.text for e in of(events, ev.TextDone)) == "got hi"
    # Usage adds up every model response of the turn (two here).
    responses = [m for m in messages("tool_call") if m.get("type") == "message_end"]
    inputs = sum(m["message"]["usage"]["input"] for m in responses if "usage" in m["message"])
    assert of(events, ev.Usage)[0].input_tokens == inputs
    assert events[-1] == ev.TurnFinished()


def test_thinking_is_closed_before_the_text_that_follows_it() -> None:
    events = replay("thinking")
    kinds = [type(e) for e in events]
    (done,) = of(events, ev.ReasoningDone)
    assert done.text == "plan the work carefully"
    assert "".join(d.delta for d in of(events, ev.ReasoningDelta)) == done.text
    assert kinds.index(ev.ReasoningDone) < kinds.index(ev.TextDelta)
    assert kinds.count(ev.ReasoningDone) == 1  # Pi's late thinking_end adds nothing


def test_provider_failure_fixture() -> None:
    events = replay("provider_failure")
    assert events[-1] == ev.TurnFailed("bad request words", "provider_error")
    assert not of(events, ev.TextDone)


def test_denied_tool_is_a_failed_call() -> None:
    events = replay("denied")
    (finished,) = of(events, ev.ToolCallFinished)
    assert not finished.ok and finished.output == "Tool bash not found"


def test_interrupted_turn_ends_without_an_outcome_and_keeps_its_text() -> None:
    events = replay("interrupted", interrupted=True)
    assert not of(events, ev.TurnFinished) and not of(events, ev.TurnFailed)
    (done,) = of(events, ev.TextDone)
    assert done.text.startswith("word")
    # Not asked for by the engine, an aborted turn is a failure.
    assert isinstance(replay("interrupted")[-1], ev.TurnFailed)


def test_resume_fixture_keeps_the_session() -> None:
    events = replay("resume")
    assert events[0] == ev.NativeSession(state_session("resume"))
    assert of(events, ev.TextDone)[0].text == "you said apple"


def test_a_refused_prompt_fails_the_turn() -> None:
    parser = PiParser()
    refused = {"id": PROMPT_ID, "type": "response", "command": "prompt", "success": False}
    assert parser.feed(refused) == [ev.TurnFailed(PROMPT_REFUSED, "harness_error")]
    assert parser.finished and parser.at_eof() == []


def test_stdout_ending_early_closes_open_text_and_fails() -> None:
    parser = PiParser()
    parser.feed({"type": "message_start", "message": {"role": "assistant"}})
    delta = {"type": "text_delta", "contentIndex": 0, "delta": "partial"}
    parser.feed({"type": "message_update", "assistantMessageEvent": delta})
    assert parser.at_eof() == [
        ev.TextDone("m1c0", "partial"),
        ev.TurnFailed(EXITED, "harness_error"),
    ]


def test_the_mcp_extensions_notification_is_a_notice() -> None:
    parser = PiParser()
    notify = {
        "type": "extension_ui_request",
        "id": "x",
        "method": "notify",
        "message": "The MCP server vault could not be started.",
        "notifyType": "warning",
    }
    assert parser.feed(notify) == [ev.Notice("The MCP server vault could not be started.")]
    assert parser.feed({**notify, "method": "setStatus"}) == []


def test_an_error_naming_a_host_is_replaced() -> None:
    parser = PiParser()
    end = {
        "type": "message_end",
        "message": {
            "role": "assistant",
            "stopReason": "error",
            "errorMessage": "Connection error: http://127.0.0.1:4000/gateway refused",
        },
    }
    parser.feed(end)
    outcome = parser.feed({"type": "agent_end", "messages": []})[-1]
    assert outcome == ev.TurnFailed("The model provider refused the request.", "provider_error")


def test_a_finished_compaction_is_reported_and_an_abandoned_one_is_not() -> None:
    """Pi 0.73.1's `compaction_end`: with a `result` when the history was summarised, without
    one when it was aborted, failed or found nothing to compact."""
    parser = PiParser()
    assert parser.feed({"type": "compaction_start", "reason": "threshold"}) == []
    done = {
        "type": "compaction_end",
        "reason": "threshold",
        "result": {"summary": "s", "firstKeptEntryId": "e1", "tokensBefore": 1500},
        "aborted": False,
        "willRetry": False,
    }
    assert parser.feed(done) == [ev.ConversationCompacted()]
    failed = {**done, "result": None, "errorMessage": "Compaction failed: no model"}
    assert parser.feed(failed) == []
    assert parser.feed({**done, "result": None, "aborted": True}) == []
