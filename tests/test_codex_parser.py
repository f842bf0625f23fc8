"""The Codex notification parser, on real app-server output captured from live runs
(harness_bases/codex/fixtures, rewritten by UHP_CAPTURE_CODEX_FIXTURES=1 pytest
tests/test_codex_base.py) and on small hand-made messages for edges the runs never hit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.codex.failures import classify_failure
from harness_bases.codex.parser import CodexParser
from harness_bases.jsonrpc import is_notification, is_response

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "codex" / "fixtures"


def replay(name: str) -> tuple[list[ev.AgentEvent], CodexParser]:
    """Feed a fixture through the parser the way the driver does: thread and turn ids from
    the responses, then every notification."""
    msgs = [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]
    results = [m["result"] for m in msgs if is_response(m) and isinstance(m.get("result"), dict)]
    thread_id = next(r["thread"]["id"] for r in results if "thread" in r)
    turn_id = next(r["turn"]["id"] for r in results if "turn" in r)
    parser = CodexParser(thread_id=thread_id, turn_id=turn_id)
    events = [e for m in msgs if is_notification(m) for e in parser.feed(m)]
    return events + parser.at_eof(), parser


def of(events: list[ev.AgentEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def test_text_fixture() -> None:
    events, parser = replay("text")
    deltas = of(events, ev.TextDelta)
    (done,) = of(events, ev.TextDone)
    assert len(deltas) > 1
    assert {d.item for d in deltas} == {done.item}
    assert "".join(d.delta for d in deltas) == done.text == "hello world, this is streamed"
    assert isinstance(events[-1], ev.TurnFinished) and parser.finished
    (usage,) = of(events, ev.Usage)
    assert usage.input_tokens > 0 and usage.output_tokens > 0


def test_tool_call_fixture() -> None:
    events, _ = replay("tool_call")
    kinds = [type(e) for e in events]
    assert kinds.index(ev.ToolCallStarted) < kinds.index(ev.ToolCallFinished)
    assert kinds.index(ev.ToolCallFinished) < kinds.index(ev.TextDone)
    (started,) = of(events, ev.ToolCallStarted)
    (finished,) = of(events, ev.ToolCallFinished)
    assert started.name == "shell"
    assert json.loads(started.arguments)["command"].endswith("'echo hi'")
    assert finished == ev.ToolCallFinished(started.call, "hi\n", True)
    assert of(events, ev.TextDone)[0].text == "got hi"
    # Two model requests in the turn; usage is cumulative for the turn.
    usages = of(events, ev.Usage)
    assert len(usages) == 2 and usages[1].input_tokens > usages[0].input_tokens
    assert isinstance(events[-1], ev.TurnFinished)


def test_reasoning_fixture() -> None:
    events, _ = replay("reasoning")
    deltas = of(events, ev.ReasoningDelta)
    (done,) = of(events, ev.ReasoningDone)
    assert len(deltas) > 1 and "".join(d.delta for d in deltas) == done.text
    assert done.text == "plan the work carefully"
    kinds = [type(e) for e in events]
    assert kinds.index(ev.ReasoningDone) < kinds.index(ev.TextDelta)
    assert of(events, ev.TextDone)[0].text == "x"


def test_provider_failure_fixture() -> None:
    events, _ = replay("provider_failure")
    assert events == [ev.TurnFailed("bad", "provider_error")]


def test_resume_fixture_ignores_the_previous_turns_usage() -> None:
    events, _ = replay("resume")
    assert of(events, ev.TextDone)[0].text == "you said apple"
    # The resumed thread first replays the last turn's usage (another turnId): ignored,
    # and this turn's usage is its own share of the thread total.
    msgs = [json.loads(line) for line in (FIXTURES / "resume.jsonl").read_text().splitlines()]
    updates = [m["params"] for m in msgs if m.get("method") == "thread/tokenUsage/updated"]
    assert len(updates) == 2 and updates[0]["turnId"] != updates[1]["turnId"]
    (usage,) = of(events, ev.Usage)
    last = updates[1]["tokenUsage"]["last"]
    assert usage == ev.Usage(last["inputTokens"], last["outputTokens"], last["cachedInputTokens"])
    assert isinstance(events[-1], ev.TurnFinished)


def test_interrupted_fixture_has_no_outcome() -> None:
    events, parser = replay("interrupted")
    assert of(events, ev.TextDelta)
    assert not of(events, ev.TurnFinished) and not of(events, ev.TurnFailed)
    assert parser.finished


# -- hand-made edges ---------------------------------------------------------------------------


def note(method: str, **params: object) -> dict:
    return {"method": method, "params": {"threadId": "th", "turnId": "tu", **params}}


def item(method: str, **fields: object) -> dict:
    return note(method, item=fields)


def test_other_threads_and_turns_are_ignored() -> None:
    parser = CodexParser("th", "tu")
    other_thread = {
        **note("item/agentMessage/delta", itemId="m", delta="x"),
        "params": {"threadId": "sub-agent", "turnId": "tu", "itemId": "m", "delta": "x"},
    }
    other_turn = note("item/agentMessage/delta", itemId="m", delta="x", turnId="old")
    assert parser.feed(other_thread) == []
    assert parser.feed(other_turn) == []
    assert parser.feed(note("item/agentMessage/delta", itemId="m", delta="y")) == [
        ev.TextDelta("m", "y")
    ]


def test_responses_and_requests_are_not_events() -> None:
    parser = CodexParser("th", "tu")
    assert parser.feed({"id": 4, "result": {}}) == []
    request = {"id": 0, "method": "item/commandExecution/requestApproval", "params": {}}
    assert parser.feed(request) == []


def test_summary_parts_are_separated() -> None:
    parser = CodexParser("th", "tu")
    events = []
    for index, delta in ((0, "first"), (1, "second")):
        events += parser.feed(
            note("item/reasoning/summaryTextDelta", itemId="r", delta=delta, summaryIndex=index)
        )
    events += parser.feed(
        item("item/completed", type="reasoning", id="r", summary=["first", "second"], content=[])
    )
    deltas = [e.delta for e in events if isinstance(e, ev.ReasoningDelta)]
    assert deltas == ["first", "\n\n", "second"]
    assert events[-1] == ev.ReasoningDone("r", "first\n\nsecond")


def test_done_without_deltas_sends_the_whole_text_as_one_delta() -> None:
    parser = CodexParser("th", "tu")
    events = parser.feed(item("item/completed", type="agentMessage", id="m", text="whole"))
    assert events == [ev.TextDelta("m", "whole"), ev.TextDone("m", "whole")]
    empty = parser.feed(item("item/completed", type="reasoning", id="r", summary=[]))
    assert empty == []


def test_file_change_and_mcp_calls() -> None:
    parser = CodexParser("th", "tu")
    change = {"path": "a.txt", "kind": {"type": "add"}, "diff": "+hi\n"}
    started = parser.feed(
        item("item/started", type="fileChange", id="p", changes=[change], status="inProgress")
    )
    finished = parser.feed(
        item("item/completed", type="fileChange", id="p", changes=[change], status="completed")
    )
    assert started == [
        ev.ToolCallStarted(
            "p",
            "apply_patch",
            json.dumps({"changes": [{"path": "a.txt", "kind": "add", "diff": "+hi\n"}]}),
        )
    ]
    assert finished == [ev.ToolCallFinished("p", "add: a.txt", True)]

    mcp = {
        "type": "mcpToolCall",
        "id": "c",
        "server": "docs",
        "tool": "search",
        "arguments": {"q": "x"},
        "status": "inProgress",
    }
    assert parser.feed(item("item/started", **mcp)) == [
        ev.ToolCallStarted("c", "docs.search", '{"q": "x"}')
    ]
    result = {"content": [{"type": "text", "text": "found"}]}
    done = parser.feed(item("item/completed", **{**mcp, "status": "completed", "result": result}))
    assert done == [ev.ToolCallFinished("c", "found", True)]
    failed = {**mcp, "id": "d", "status": "failed", "error": {"message": "boom"}}
    # Completed without a start (e.g. refused up front): both events at once.
    assert parser.feed(item("item/completed", **failed)) == [
        ev.ToolCallStarted("d", "docs.search", '{"q": "x"}'),
        ev.ToolCallFinished("d", "boom", False),
    ]


def test_declined_command_is_not_ok() -> None:
    parser = CodexParser("th", "tu")
    cmd = {
        "type": "commandExecution",
        "id": "x",
        "command": "rm -rf /",
        "status": "declined",
        "aggregatedOutput": None,
        "exitCode": None,
    }
    events = parser.feed(item("item/completed", **cmd))
    assert events[-1] == ev.ToolCallFinished("x", "", False)


def test_error_then_eof_reports_the_error() -> None:
    parser = CodexParser("th", "tu")
    retry = {"message": "Reconnecting... 1/2", "codexErrorInfo": "other"}
    assert parser.feed(note("error", error=retry, willRetry=True)) == []
    fatal = {"message": "stream died", "codexErrorInfo": {"responseStreamDisconnected": {}}}
    assert parser.feed(note("error", error=fatal, willRetry=False)) == []
    assert parser.at_eof() == [ev.TurnFailed("stream died", "provider_error")]
    assert parser.at_eof() == []


def test_eof_without_anything() -> None:
    assert CodexParser("th", "tu").at_eof() == [
        ev.TurnFailed("the agent exited unexpectedly", "harness_error")
    ]


def test_mcp_startup_failure_is_a_notice() -> None:
    parser = CodexParser("th", "tu")
    msg = {
        "method": "mcpServer/startupStatus/updated",
        "params": {"name": "docs", "status": "failed", "error": "timed out", "threadId": None},
    }
    assert parser.feed(msg) == [ev.Notice("The MCP server docs could not be started: timed out.")]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            {"message": '{"error": {"message": "bad", "type": "x"}}', "codexErrorInfo": "other"},
            ev.TurnFailed("bad", "provider_error"),
        ),
        (
            {
                "message": "unexpected status 401",
                "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 401}},
            },
            ev.TurnFailed("unexpected status 401", "provider_error"),
        ),
        (
            {
                "message": "exceeded retry limit",
                "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}},
            },
            ev.TurnFailed("exceeded retry limit", "provider_error"),
        ),
        (
            {"message": "overloaded", "codexErrorInfo": "internalServerError"},
            ev.TurnFailed("overloaded", "provider_error"),
        ),
        (
            {"message": "too long", "codexErrorInfo": "contextWindowExceeded"},
            ev.TurnFailed("too long", "provider_error"),
        ),
        (
            {"message": "sandbox said no", "codexErrorInfo": "sandboxError"},
            ev.TurnFailed("sandbox said no", "harness_error"),
        ),
        (
            {"message": "invalid settings", "codexErrorInfo": "badRequest"},
            ev.TurnFailed("invalid settings", "harness_error"),
        ),
        (
            {"message": "something else", "codexErrorInfo": None},
            ev.TurnFailed("something else", "harness_error"),
        ),
        (None, ev.TurnFailed("The agent reported a failure without details.", "harness_error")),
    ],
)
def test_classify_failure(error: dict | None, expected: ev.TurnFailed) -> None:
    assert classify_failure(error) == expected


def test_a_compaction_is_reported_once_whichever_way_codex_says_it() -> None:
    """0.169.0 says it with a `contextCompaction` item and with the deprecated
    `thread/compacted` notification (its schema: `codex app-server generate-json-schema`)."""
    parser = CodexParser("th", "tu")
    compaction = item("item/completed", type="contextCompaction", id="c1")
    assert parser.feed(item("item/started", type="contextCompaction", id="c1")) == []
    assert parser.feed(compaction) == [ev.ConversationCompacted()]
    assert parser.feed(note("thread/compacted")) == []
    only_notified = CodexParser("th", "tu")
    assert only_notified.feed(note("thread/compacted")) == [ev.ConversationCompacted()]
    elsewhere = CodexParser("th", "tu")
    assert elsewhere.feed({**note("thread/compacted"), "params": {"threadId": "sub"}}) == []
