"""The Kimi CLI base's driver (the shared ACP driver, with Kimi's parser) on real captured
`kimi acp` output (through our launcher).

Each fixture under harness_bases/kimi/fixtures/ is everything the pinned Kimi CLI printed on
stdout for one process, run against the scripted provider: handshake, session, one prompt.
`UHP_CAPTURE_KIMI_FIXTURES=1 pytest tests/test_kimi_base.py` rewrites them.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness_bases import events as ev
from harness_bases.base import McpServerSpec, SandboxPaths, TurnSpec
from harness_bases.kimi import KimiBase
from harness_bases.kimi.parser import KimiParser, provider_message, whole_arguments
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.plugin_folders import LAUNCHER_ARGS, PYTHON, stdio_launches
from tests.support.acp_replay import ReplayedProcess, fixture_lines, replay_turn, text_of
from tests.support.plugin_turn import stamp_plugin

FIXTURES = Path(__file__).resolve().parent.parent / "harness_bases" / "kimi" / "fixtures"


def replay(name: str) -> ReplayedProcess:
    return ReplayedProcess(fixture_lines(FIXTURES, name))


def native_id(name: str) -> str:
    """The session id a fixture's process used."""
    for line in fixture_lines(FIXTURES, name):
        params = json.loads(line).get("params") or {}
        if "sessionId" in params:
            return str(params["sessionId"])
    raise AssertionError(f"no session in {name}")


async def drive(proc: ReplayedProcess, spec: TurnSpec) -> list[ev.AgentEvent]:
    return [event async for event in KimiBase().start_turn(proc, spec).events()]


async def test_text_streams_as_deltas_and_the_turn_finishes(tmp_path: Path) -> None:
    proc = replay("text")
    events = await drive(proc, replay_turn(tmp_path))
    assert isinstance(events[0], ev.NativeSession)
    assert text_of(events) == "hello world"
    assert ev.TextDone("text_1", "hello world") in events
    assert events[-1] == ev.TurnFinished()
    (new,) = proc.sent("session/new")
    assert new["params"]["mcpServers"] == [] and new["params"]["cwd"] == "/workspace"
    (prompt,) = proc.sent("session/prompt")
    assert prompt["params"]["prompt"] == [{"type": "text", "text": "SAY hello world"}]
    assert proc.stdin_closed  # closed after the answer, so Kimi exits


async def test_mcp_servers_and_a_plugin_s_stdio_server_go_through_session_new(
    tmp_path: Path,
) -> None:
    proc = replay("text")
    vault = McpServerSpec("vault", "http://127.0.0.1:9/mcp/vault", "uhpgw_test")
    launch = stdio_launches((stamp_plugin(),), SandboxPaths())
    await drive(proc, replay_turn(tmp_path, mcp_servers=(vault,), stdio_servers=launch))
    (new,) = proc.sent("session/new")
    assert new["params"]["mcpServers"] == [
        {
            "type": "http",
            "name": "vault",
            "url": "http://127.0.0.1:9/mcp/vault",
            "headers": [{"name": "Authorization", "value": "Bearer uhpgw_test"}],
        },
        {
            "name": "stamp",
            "command": PYTHON,
            "args": [*LAUNCHER_ARGS, "/home/agent/.uhp/plugin-servers/stamp.json"],
            "env": [],
        },
    ]


async def test_a_tool_call_starts_once_its_streamed_arguments_are_whole(tmp_path: Path) -> None:
    events = await drive(replay("tool_call"), replay_turn(tmp_path))
    (started,) = [e for e in events if isinstance(e, ev.ToolCallStarted)]
    # Kimi announces it `in_progress` with "" and streams `{"co`, `{"comman`, … after.
    assert started.name == "Shell" and json.loads(started.arguments) == {"command": "echo hi"}
    (finished,) = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert finished == ev.ToolCallFinished(started.call, "hi\n", True)
    assert events.index(started) < events.index(finished)
    assert text_of(events) == "got hi" and events[-1] == ev.TurnFinished()


async def test_reasoning_is_its_own_item_before_the_tool_call(tmp_path: Path) -> None:
    events = await drive(replay("tool_call"), replay_turn(tmp_path))
    (started,) = [e for e in events if isinstance(e, ev.ToolCallStarted)]
    thought = next(e for e in events if isinstance(e, ev.ReasoningDone))
    assert thought.text == "first this" and events.index(thought) < events.index(started)


async def test_a_command_that_exits_non_zero_is_a_failed_call(tmp_path: Path) -> None:
    events = await drive(replay("tool_failure"), replay_turn(tmp_path))
    (finished,) = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert finished.ok is False and "exit code: 3" in finished.output
    assert events[-1] == ev.TurnFinished()


async def test_a_provider_failure_is_a_provider_error_with_its_message(tmp_path: Path) -> None:
    events = await drive(replay("provider_failure"), replay_turn(tmp_path))
    assert events[-1] == ev.TurnFailed("the upstream refused this", "provider_error")


async def test_a_cancelled_prompt_ends_without_success(tmp_path: Path) -> None:
    events = await drive(replay("interrupted"), replay_turn(tmp_path))
    assert not any(isinstance(e, ev.TurnFinished) for e in events)
    assert isinstance(events[-1], ev.TurnFailed)


async def test_resume_loads_the_session_and_drops_the_replayed_history(tmp_path: Path) -> None:
    proc = replay("resume")
    native = native_id("resume")
    events = await drive(proc, replay_turn(tmp_path, "RECALL", native_session_id=native))
    assert events[0] == ev.NativeSession(native)
    assert text_of(events) == "you said walrus"  # not the replayed "noted walrus"
    assert proc.sent("session/new") == []


async def test_a_missing_session_starts_a_new_one_and_says_so(tmp_path: Path) -> None:
    proc = replay("resume_missing")
    gone = "00000000-0000-0000-0000-000000000000"
    events = await drive(proc, replay_turn(tmp_path, "SAY fresh", native_session_id=gone))
    assert events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert isinstance(events[1], ev.NativeSession) and events[1].id != gone
    assert text_of(events) == "fresh"


def test_arguments_are_whole_only_as_a_json_object() -> None:
    assert whole_arguments('{"command": "echo hi"}') == {"command": "echo hi"}
    for partial in ("", '{"co', '{"command": "echo hi"', "[1]", '"text"'):
        assert whole_arguments(partial) is None


def test_a_call_with_no_arguments_starts_when_it_finishes() -> None:
    parser = KimiParser()

    def update(kind: str, status: str, text: str) -> dict:
        content = [{"type": "content", "content": {"type": "text", "text": text}}]
        body: dict = {"sessionUpdate": kind, "toolCallId": "t/1", "title": "TaskList"}
        body |= {"status": status, "content": content}
        return {"method": "session/update", "params": {"update": body}}

    assert parser.feed(update("tool_call", "in_progress", "")) == []
    assert parser.feed(update("tool_call_update", "completed", "no tasks")) == [
        ev.ToolCallStarted("t/1", "TaskList", "{}"),
        ev.ToolCallFinished("t/1", "no tasks", True),
    ]


def test_the_provider_s_message_is_taken_out_of_its_error_body() -> None:
    python_dict = "{'error': {'message': 'quota gone', 'type': 'x', 'param': None}}"
    assert provider_message(python_dict) == "quota gone"
    assert provider_message('{"error": {"message": "bad model"}}') == "bad model"
    assert provider_message("plain text") == "plain text"
    not_ours = {"code": -32603, "message": "Internal error", "data": {"error": "Boom"}}
    assert KimiParser().prompt_error(not_ours) == [
        ev.TurnFailed("The agent could not run the turn.", "harness_error")
    ]
