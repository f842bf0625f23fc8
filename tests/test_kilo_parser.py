"""The Kilo Code CLI base's driver (the shared ACP driver) on real captured `kilo acp` output.

Each fixture under harness_bases/kilo/fixtures/ is everything the pinned Kilo CLI printed
on stdout for one process, run against the scripted provider: handshake, session, one prompt.
"""

from __future__ import annotations

from pathlib import Path

from harness_bases import events as ev
from harness_bases.base import McpServerSpec, SandboxPaths, TurnSpec
from harness_bases.kilo import KiloBase
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.plugin_folders import LAUNCHER_ARGS, PYTHON, stdio_launches
from tests.support.acp_replay import ReplayedProcess, fixture_lines, replay_turn, text_of
from tests.support.plugin_turn import stamp_plugin

FIXTURES = Path(__file__).resolve().parent.parent / "harness_bases" / "kilo" / "fixtures"


def replay(name: str) -> ReplayedProcess:
    return ReplayedProcess(fixture_lines(FIXTURES, name))


async def drive(proc: ReplayedProcess, spec: TurnSpec) -> list[ev.AgentEvent]:
    return [event async for event in KiloBase().start_turn(proc, spec).events()]


async def test_text_streams_as_deltas_and_the_turn_finishes(tmp_path: Path) -> None:
    proc = replay("text")
    events = await drive(proc, replay_turn(tmp_path))
    assert isinstance(events[0], ev.NativeSession) and events[0].id.startswith("ses_")
    assert text_of(events) == "hello world"
    assert ev.TextDone("text_1", "hello world") in events
    assert events[-1] == ev.TurnFinished()
    (new,) = proc.sent("session/new")
    assert new["params"]["mcpServers"] == []
    (prompt,) = proc.sent("session/prompt")
    assert prompt["params"]["prompt"] == [{"type": "text", "text": "SAY hello world"}]
    assert proc.stdin_closed  # closed after the answer, so Kilo exits


async def test_a_plugin_s_stdio_server_is_a_stdio_entry_beside_the_remote_ones(
    tmp_path: Path,
) -> None:
    proc = replay("text")
    vault = McpServerSpec("vault", "http://127.0.0.1:9/mcp/vault", "uhpgw_test")
    launch = stdio_launches((stamp_plugin(),), SandboxPaths())
    await drive(proc, replay_turn(tmp_path, mcp_servers=(vault,), stdio_servers=launch))
    (new,) = proc.sent("session/new")
    servers = "/home/agent/.uhp/plugin-servers"
    # No `type`: Kilo reads an entry that has one as a remote server.
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
            "args": [*LAUNCHER_ARGS, f"{servers}/stamp.json"],
            "env": [],
        },
    ]


async def test_a_tool_call_starts_with_its_whole_input(tmp_path: Path) -> None:
    events = await drive(replay("tool_call"), replay_turn(tmp_path))
    (started,) = [e for e in events if isinstance(e, ev.ToolCallStarted)]
    # The call is announced `pending` with a partial input; it starts once it runs.
    assert started.name == "bash" and '"command": "echo hi"' in started.arguments
    (finished,) = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert finished == ev.ToolCallFinished(started.call, "hi\n", True)
    assert events.index(started) < events.index(finished)
    assert text_of(events) == "got hi" and events[-1] == ev.TurnFinished()


async def test_a_command_that_exits_non_zero_is_a_failed_call(tmp_path: Path) -> None:
    events = await drive(replay("tool_failure"), replay_turn(tmp_path))
    (finished,) = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert finished.ok is False
    assert events[-1] == ev.TurnFinished()


async def test_reasoning_is_its_own_item_before_the_tool_call(tmp_path: Path) -> None:
    events = await drive(replay("tool_call"), replay_turn(tmp_path))
    (started,) = [e for e in events if isinstance(e, ev.ToolCallStarted)]
    thought = next(e for e in events if isinstance(e, ev.ReasoningDone))
    assert thought.text == "first this" and events.index(thought) < events.index(started)


async def test_a_provider_failure_is_a_provider_error_with_its_message(tmp_path: Path) -> None:
    events = await drive(replay("provider_failure"), replay_turn(tmp_path))
    assert events[-1] == ev.TurnFailed("the upstream refused this", "provider_error")


async def test_a_cancelled_prompt_ends_without_success(tmp_path: Path) -> None:
    events = await drive(replay("interrupted"), replay_turn(tmp_path))
    assert not any(isinstance(e, ev.TurnFinished) for e in events)
    assert isinstance(events[-1], ev.TurnFailed)


async def test_resume_loads_the_session_and_drops_the_replayed_history(tmp_path: Path) -> None:
    proc = replay("resume")
    native = "ses_db1311040ffe8U33BDJsfXaIz4"
    events = await drive(proc, replay_turn(tmp_path, "RECALL", native_session_id=native))
    assert events[0] == ev.NativeSession(native)
    assert text_of(events) == "you said walrus"  # not the replayed "noted walrus"
    assert proc.sent("session/new") == []


async def test_a_missing_session_starts_a_new_one_and_says_so(tmp_path: Path) -> None:
    proc = replay("resume_missing")
    events = await drive(proc, replay_turn(tmp_path, "SAY fresh", native_session_id="ses_gone"))
    assert events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert isinstance(events[1], ev.NativeSession) and events[1].id != "ses_gone"
    assert text_of(events) == "fresh"


async def test_an_interrupt_before_the_prompt_means_no_prompt(tmp_path: Path) -> None:
    proc = replay("text")
    agent_turn = KiloBase().start_turn(proc, replay_turn(tmp_path))
    agen = agent_turn.events()
    assert isinstance(await anext(agen), ev.NativeSession)
    assert await agent_turn.interrupt() is True
    assert [event async for event in agen] == []
    assert proc.sent("session/prompt") == [] and proc.stdin_closed
    assert await agent_turn.interrupt() is False  # the turn is over
