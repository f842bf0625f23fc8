"""The OpenHands base's driver (the shared ACP driver with its parser) on real captured output.

Each fixture under harness_bases/openhands/fixtures/ is everything the pinned OpenHands CLI
printed on stdout, through our launcher, for one process run against the scripted provider
(`UHP_CAPTURE_OPENHANDS_FIXTURES=1 pytest tests/test_openhands_base.py` rewrites them):
handshake, session, one prompt."""

from __future__ import annotations

import json
from pathlib import Path

from harness_bases import events as ev
from harness_bases.acp.parser import EXITED
from harness_bases.base import TurnSpec
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.openhands import OpenHandsBase
from harness_bases.openhands.parser import OpenHandsParser
from tests.support.acp_replay import ReplayedProcess, fixture_lines, replay_turn, text_of

FIXTURES = Path(__file__).resolve().parent.parent / "harness_bases" / "openhands" / "fixtures"
OLD_SESSION = "0b6f3c2e-9d4a-4f57-8e21-5a1c7d9e0f13"


def replay(name: str) -> ReplayedProcess:
    return ReplayedProcess(fixture_lines(FIXTURES, name))


async def drive(proc: ReplayedProcess, spec: TurnSpec) -> list[ev.AgentEvent]:
    return [event async for event in OpenHandsBase().start_turn(proc, spec).events()]


async def test_text_streams_as_deltas_and_the_turn_finishes(tmp_path: Path) -> None:
    proc = replay("text")
    events = await drive(proc, replay_turn(tmp_path))
    assert isinstance(events[0], ev.NativeSession)
    assert text_of(events) == "hello world"
    assert len([e for e in events if isinstance(e, ev.TextDelta)]) > 1
    assert ev.TextDone("text_1", "hello world") in events
    assert not [e for e in events if isinstance(e, ev.ReasoningDelta)]
    assert events[-1] == ev.TurnFinished()
    (new,) = proc.sent("session/new")
    assert new["params"]["mcpServers"] == []  # in the launcher's turn file instead
    (prompt,) = proc.sent("session/prompt")
    assert prompt["params"]["prompt"] == [{"type": "text", "text": "SAY hello world"}]
    assert proc.stdin_closed  # closed after the answer, so the launcher exits


async def test_a_tool_call_has_its_name_input_and_output(tmp_path: Path) -> None:
    events = await drive(replay("tool_call"), replay_turn(tmp_path))
    (started,) = [e for e in events if isinstance(e, ev.ToolCallStarted)]
    assert started.name == "terminal"
    assert json.loads(started.arguments)["command"] == "echo hi"
    (finished,) = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert finished.call == started.call and finished.ok and finished.output.strip() == "hi"
    assert events.index(started) < events.index(finished)
    reasoning = [e for e in events if isinstance(e, ev.ReasoningDone)]
    assert reasoning and reasoning[0].text == "first this"
    assert text_of(events) == "got hi" and events[-1] == ev.TurnFinished()


async def test_a_failed_command_is_not_ok(tmp_path: Path) -> None:
    events = await drive(replay("tool_failure"), replay_turn(tmp_path))
    (finished,) = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert not finished.ok
    assert text_of(events) == "done" and events[-1] == ev.TurnFinished()


async def test_resume_loads_the_session_and_drops_its_replay(tmp_path: Path) -> None:
    proc = replay("resume")
    events = await drive(proc, replay_turn(tmp_path, native_session_id=OLD_SESSION))
    (load,) = proc.sent("session/load")
    assert load["params"]["sessionId"] == OLD_SESSION
    assert not proc.sent("session/new")
    assert not [e for e in events if isinstance(e, ev.Notice)]
    assert text_of(events) == "you said walrus"  # the replayed "noted walrus" is dropped


async def test_a_lost_session_starts_fresh_and_says_so(tmp_path: Path) -> None:
    proc = replay("resume_missing")
    events = await drive(proc, replay_turn(tmp_path, native_session_id=OLD_SESSION))
    assert events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert len(proc.sent("session/load")) == 1 and len(proc.sent("session/new")) == 1
    assert text_of(events) == "fresh"


async def test_a_provider_failure_is_a_provider_error_with_its_message(tmp_path: Path) -> None:
    events = await drive(replay("provider_failure"), replay_turn(tmp_path))
    outcome = events[-1]
    assert isinstance(outcome, ev.TurnFailed) and outcome.code == "provider_error"
    assert "the upstream refused this" in outcome.message


async def test_an_interrupted_turn_is_not_finished(tmp_path: Path) -> None:
    events = await drive(replay("interrupted"), replay_turn(tmp_path))
    assert not isinstance(events[-1], ev.TurnFinished)
    assert text_of(events)  # what streamed before the cancel


async def test_stdout_ending_mid_turn_fails_the_turn(tmp_path: Path) -> None:
    lines = fixture_lines(FIXTURES, "tool_call")
    cut = [line for line in lines if b'"id":3,' not in line][:-2]
    events = await drive(ReplayedProcess(cut), replay_turn(tmp_path))
    assert events[-1] == ev.TurnFailed(EXITED, "harness_error")


def test_a_prompt_error_that_is_not_the_provider_s_is_a_harness_error() -> None:
    parser = OpenHandsParser()
    parser.prompt_id = 3
    error = {"code": -32603, "message": "Internal error", "data": {"details": "boom"}}
    (failed,) = parser.feed({"jsonrpc": "2.0", "id": 3, "error": error})
    assert isinstance(failed, ev.TurnFailed) and failed.code == "harness_error"
