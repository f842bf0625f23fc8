"""The Qwen Code base's driver (the shared ACP driver with Qwen's parser) on real captured
`qwen --acp` output: each fixture under harness_bases/qwen_code/fixtures/ is everything the
pinned CLI printed on stdout for one process (rewritten by UHP_CAPTURE_QWEN_CODE_FIXTURES=1
pytest tests/test_qwen_code_base.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.base import TurnSpec
from harness_bases.qwen_code import QwenCodeBase
from harness_bases.qwen_code.parser import QwenParser
from tests.support.acp_replay import ReplayedProcess, fixture_lines

FIXTURES = Path(__file__).resolve().parent.parent / "harness_bases" / "qwen_code" / "fixtures"


def spec(tmp_path: Path, **fields: Any) -> TurnSpec:
    return TurnSpec(
        prompt="SAY hello world",
        model="gpt-test",
        gateway_url="http://127.0.0.1:9/gateway/openai/v1",
        gateway_token="uhpgw_test",
        host_workspace=tmp_path / "workspace",
        host_home=tmp_path / "home",
        host_tools=tmp_path / "tools",
        **fields,
    )


async def drive(tmp_path: Path, name: str, **fields: Any) -> list[ev.AgentEvent]:
    proc = ReplayedProcess(fixture_lines(FIXTURES, name))
    turn = QwenCodeBase().start_turn(proc, spec(tmp_path, **fields))
    return [event async for event in turn.events()]


RESUMED = "0c6b0a55-3d1e-4f1a-9a53-2c0f1f6b7e10"  # the fixtures replay a session/load


def of(events: list[ev.AgentEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


async def test_text(tmp_path: Path) -> None:
    events = await drive(tmp_path, "text")
    assert isinstance(events[0], ev.NativeSession)
    deltas = of(events, ev.TextDelta)
    (done,) = of(events, ev.TextDone)
    assert len(deltas) > 1 and "".join(d.delta for d in deltas) == done.text
    assert done.text == "hello world, this is streamed"
    (usage,) = of(events, ev.Usage)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert events[-1] == ev.TurnFinished()


async def test_a_tool_call_starts_with_its_arguments(tmp_path: Path) -> None:
    events = await drive(tmp_path, "tool_call")
    (started,) = of(events, ev.ToolCallStarted)
    (finished,) = of(events, ev.ToolCallFinished)
    # Qwen announces the call `pending` with no input; it starts once its input is whole.
    assert started.name == "run_shell_command"
    assert json.loads(started.arguments)["command"] == "echo hi"
    assert finished == ev.ToolCallFinished(started.call, "hi", True)
    assert [d.text for d in of(events, ev.ReasoningDone)] == ["plan it", "plan it"]
    assert of(events, ev.TextDone)[-1].text == "got hi"
    assert events[-1] == ev.TurnFinished()


async def test_a_denied_tool_is_a_failed_call(tmp_path: Path) -> None:
    events = await drive(tmp_path, "denied", native_session_id=RESUMED)
    (finished,) = of(events, ev.ToolCallFinished)
    assert not finished.ok and "not found in registry" in finished.output


async def test_a_resumed_session_loads_and_remembers(tmp_path: Path) -> None:
    proc = ReplayedProcess(fixture_lines(FIXTURES, "resume"))
    turn = QwenCodeBase().start_turn(proc, spec(tmp_path, native_session_id=RESUMED))
    events = [event async for event in turn.events()]
    assert events[0] == ev.NativeSession(RESUMED) and not of(events, ev.Notice)
    assert [m["params"]["sessionId"] for m in proc.sent("session/load")] == [RESUMED]
    assert of(events, ev.TextDone)[-1].text == "you said apple"


async def test_a_refused_model_call_is_a_provider_error_with_its_words(tmp_path: Path) -> None:
    events = await drive(tmp_path, "provider_failure")
    assert events[-1] == ev.TurnFailed("bad request words", "provider_error")


async def test_an_interrupted_turn_does_not_finish(tmp_path: Path) -> None:
    events = await drive(tmp_path, "interrupted")
    assert not of(events, ev.TurnFinished)
    assert of(events, ev.TextDelta)


def test_a_failed_shell_command_is_not_ok() -> None:
    parser = QwenParser()
    raw = {"type": "shell_result", "output": "", "exitCode": 3}
    update = {"status": "completed", "rawOutput": raw, "content": []}
    assert parser.tool_result(update) == ("", False)


def test_a_prompt_error_naming_a_host_is_replaced() -> None:
    error = {"code": -32603, "data": {"details": "502 connect to http://10.0.0.1:80 failed"}}
    (failed,) = QwenParser().prompt_error(error)
    assert failed == ev.TurnFailed("The model provider refused the request.", "provider_error")
    other = QwenParser().prompt_error({"code": -32603, "message": "Internal error"})
    assert other == [ev.TurnFailed("The agent could not run the turn.", "harness_error")]
