"""The Gemini CLI base's driver (the shared ACP driver with Gemini's parser) on real captured
`gemini --acp` output: each fixture under harness_bases/gemini_cli/fixtures/ is everything the
pinned CLI printed on stdout for one process (rewritten by UHP_CAPTURE_GEMINI_CLI_FIXTURES=1
pytest tests/test_gemini_cli_base.py), with the load hook (acp_fixes.mjs) in place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.base import SandboxPaths, TurnSpec
from harness_bases.gemini_cli import GeminiCliBase
from harness_bases.gemini_cli.parser import GeminiParser
from harness_bases.plugin_folders import LAUNCHER_ARGS, PYTHON, stdio_launches
from tests.support.acp_replay import ReplayedProcess, fixture_lines
from tests.support.plugin_turn import stamp_plugin

FIXTURES = Path(__file__).resolve().parent.parent / "harness_bases" / "gemini_cli" / "fixtures"
RESUMED = "0c6b0a55-3d1e-4f1a-9a53-2c0f1f6b7e10"  # the fixtures replay a session/load


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
    turn = GeminiCliBase().start_turn(proc, spec(tmp_path, **fields))
    return [event async for event in turn.events()]


def of(events: list[ev.AgentEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


async def test_text(tmp_path: Path) -> None:
    events = await drive(tmp_path, "text")
    # A new session's id goes out only as its first turn finishes (forgets_unfinished_turns).
    assert isinstance(events[-2], ev.NativeSession)
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
    assert started.name == "run_shell_command"  # from the toolCallId, not the title
    assert json.loads(started.arguments)["command"] == "echo hi"  # added by the load hook
    assert finished == ev.ToolCallFinished(started.call, "hi", True)
    assert next(d.text for d in of(events, ev.ReasoningDone)) == "planit"
    assert of(events, ev.TextDone)[-1].text == "got hi"
    assert events[-1] == ev.TurnFinished()


async def test_a_denied_tool_is_never_run(tmp_path: Path) -> None:
    events = await drive(tmp_path, "denied", native_session_id=RESUMED)
    assert not [f for f in of(events, ev.ToolCallFinished) if f.ok and f.output == "ran"]
    assert events[-1] == ev.TurnFinished()


async def test_a_resumed_session_loads_and_remembers(tmp_path: Path) -> None:
    proc = ReplayedProcess(fixture_lines(FIXTURES, "resume"))
    turn = GeminiCliBase().start_turn(proc, spec(tmp_path, native_session_id=RESUMED))
    events = [event async for event in turn.events()]
    assert events[0] == ev.NativeSession(RESUMED) and not of(events, ev.Notice)
    assert [m["params"]["sessionId"] for m in proc.sent("session/load")] == [RESUMED]
    # The replayed history ("noted apple") is not this turn's.
    assert [d.text for d in of(events, ev.TextDone)] == ["you said apple"]


async def test_a_resumed_session_is_loaded_with_the_plugins_stdio_servers(
    tmp_path: Path,
) -> None:
    proc = ReplayedProcess(fixture_lines(FIXTURES, "resume"))
    launch = stdio_launches((stamp_plugin(),), SandboxPaths())
    fields = {"native_session_id": RESUMED, "stdio_servers": launch}
    [event async for event in GeminiCliBase().start_turn(proc, spec(tmp_path, **fields)).events()]
    (load,) = proc.sent("session/load")
    servers = "/home/agent/.uhp/plugin-servers"
    assert load["params"]["mcpServers"] == [
        {
            "name": "stamp",
            "command": PYTHON,
            "args": [*LAUNCHER_ARGS, f"{servers}/stamp.json"],
            "env": [],
        }
    ]


async def test_a_refused_model_call_is_a_provider_error_with_its_words(tmp_path: Path) -> None:
    events = await drive(tmp_path, "provider_failure")
    assert events[-1] == ev.TurnFailed("bad request words", "provider_error")


async def test_an_interrupted_turn_does_not_finish(tmp_path: Path) -> None:
    events = await drive(tmp_path, "interrupted")
    assert not of(events, ev.TurnFinished)
    assert of(events, ev.TextDelta)


def test_a_silent_failed_command_is_not_ok() -> None:
    update = {
        "toolCallId": "run_shell_command__x_0",
        "status": "completed",
        "kind": "execute",
        "content": [
            {"type": "content", "content": {"type": "text", "text": "Command exited with code: 3"}}
        ],
    }
    assert GeminiParser().tool_result(update) == ("Command exited with code: 3", False)
    assert GeminiParser().tool_name(update) == "run_shell_command"
    blocked = "Blocked: command substitution detected in shell command."
    refused = {
        **update,
        "content": [{"type": "content", "content": {"type": "text", "text": blocked}}],
    }
    assert GeminiParser().tool_result(refused) == (blocked, False)
    assert GeminiParser().tool_name({"toolCallId": "plain", "title": "T"}) == "T"


def test_a_prompt_error_naming_a_host_is_replaced() -> None:
    error = {"code": -32603, "message": "connect to http://10.0.0.1:80 failed"}
    (failed,) = GeminiParser().prompt_error(error)
    assert failed == ev.TurnFailed("The model provider refused the request.", "provider_error")
    other = GeminiParser().prompt_error({"code": -32603})
    assert other == [ev.TurnFailed("The agent could not run the turn.", "harness_error")]


def test_a_thought_without_a_subject_loses_the_empty_marker() -> None:
    parser = GeminiParser(prompt_id=3)
    chunk = {"type": "text", "text": "****\nplan"}
    update = {"sessionUpdate": "agent_thought_chunk", "content": chunk}
    events = parser.feed({"method": "session/update", "params": {"update": update}})
    assert next(e for e in events if isinstance(e, ev.ReasoningDelta)).delta == "plan"
