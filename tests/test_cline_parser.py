"""The Cline base's driver (the shared ACP driver) on real captured `cline --acp` output.

Each fixture under harness_bases/cline/fixtures/ is everything the pinned Cline printed on
stdout for one process, run against the scripted provider: handshake, session, the model
chosen, one prompt (tests/test_cline_base.py captures them).
"""

from __future__ import annotations

from pathlib import Path

from harness_bases import events as ev
from harness_bases.base import TurnSpec
from harness_bases.cline import ClineBase
from harness_bases.cline.parser import ClineParser
from harness_bases.messages import RESUME_FAILED_NOTICE
from tests.support.acp_replay import ReplayedProcess, fixture_lines, replay_turn, text_of

FIXTURES = Path(__file__).resolve().parent.parent / "harness_bases" / "cline" / "fixtures"
RESUMED = "1796620034124_Zz8KN_cli"


def replay(name: str) -> ReplayedProcess:
    return ReplayedProcess(fixture_lines(FIXTURES, name))


async def drive(proc: ReplayedProcess, spec: TurnSpec) -> list[ev.AgentEvent]:
    return [event async for event in ClineBase().start_turn(proc, spec).events()]


async def test_text_streams_after_the_model_is_chosen(tmp_path: Path) -> None:
    proc = replay("text")
    events = await drive(proc, replay_turn(tmp_path))
    assert isinstance(events[0], ev.NativeSession)
    assert text_of(events) == "hello world" and events[-1] == ev.TurnFinished()
    (new,) = proc.sent("session/new")
    assert new["params"]["mcpServers"] == []
    # Cline's own catalogue does not list the gateway's model: it is chosen after session/new.
    (chosen,) = proc.sent("session/set_config_option")
    assert chosen["params"] == {"sessionId": events[0].id, "configId": "model", "value": "gpt-test"}
    assert proc.stdin_closed


async def test_a_command_is_a_run_commands_call_with_its_result(tmp_path: Path) -> None:
    events = await drive(replay("tool_call"), replay_turn(tmp_path))
    (started,) = [e for e in events if isinstance(e, ev.ToolCallStarted)]
    assert started.name == "run_commands" and '"commands": ["echo hi"]' in started.arguments
    (finished,) = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert finished == ev.ToolCallFinished(started.call, "hi\n", True)
    thought = next(e for e in events if isinstance(e, ev.ReasoningDone))
    assert thought.text == "first this" and events.index(thought) < events.index(started)
    assert events[-1] == ev.TurnFinished()


async def test_a_command_that_exits_non_zero_is_a_failed_call(tmp_path: Path) -> None:
    events = await drive(replay("tool_failure"), replay_turn(tmp_path))
    (finished,) = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert finished.ok is False and "exited with code 3" in finished.output
    assert events[-1] == ev.TurnFinished()


async def test_a_provider_failure_is_a_provider_error_with_its_message(tmp_path: Path) -> None:
    events = await drive(replay("provider_failure"), replay_turn(tmp_path))
    assert events[-1] == ev.TurnFailed("the upstream refused this", "provider_error")


def test_another_prompt_error_is_the_harness_s() -> None:
    failed = ClineParser().prompt_error({"code": -32000, "message": "Authentication required"})
    assert failed == [ev.TurnFailed("The agent could not run the turn.", "harness_error")]


async def test_a_cancelled_prompt_ends_without_success(tmp_path: Path) -> None:
    events = await drive(replay("interrupted"), replay_turn(tmp_path))
    assert not any(isinstance(e, ev.TurnFinished) for e in events)
    assert isinstance(events[-1], ev.TurnFailed)


async def test_resume_loads_the_session_and_drops_the_replayed_history(tmp_path: Path) -> None:
    proc = replay("resume")
    events = await drive(proc, replay_turn(tmp_path, "RECALL", native_session_id=RESUMED))
    assert events[0] == ev.NativeSession(RESUMED)
    assert text_of(events) == "you said walrus"  # not the replayed "noted walrus"
    assert proc.sent("session/new") == []


async def test_a_missing_session_starts_a_new_one_and_says_so(tmp_path: Path) -> None:
    proc = replay("resume_missing")
    events = await drive(proc, replay_turn(tmp_path, "SAY fresh", native_session_id="gone_cli"))
    assert events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert isinstance(events[1], ev.NativeSession) and events[1].id != "gone_cli"
    assert text_of(events) == "fresh"
