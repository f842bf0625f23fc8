"""CodexBase against the real pinned Codex CLI and the scripted provider (no sandbox).

The CLI comes from the shared `codex_installed` fixture (CodexBase.install into the tools
cache, once per machine). Set UHP_CAPTURE_CODEX_FIXTURES=1 to rewrite the parser fixtures
in harness_bases/codex/fixtures/ from these live runs.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import SYSTEM_PATH, TurnSpec
from harness_bases.codex import CodexBase
from harness_bases.codex.config import TOKEN_ENV
from harness_bases.codex.install import binary_path
from harness_bases.codex.instructions import UPDATE_PREFIX, update_message
from harness_bases.messages import RESUME_FAILED_NOTICE
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.direct_turn import OUTCOMES, DirectTurn
from tests.support.installs import install_commands
from tests.support.live_base import LiveBase, capturing

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "codex" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_CODEX_FIXTURES") else None


@pytest.fixture
def env(codex_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(
        CodexBase(), provider, codex_installed, tmp_path, timeout=60, fixtures=CAPTURE
    )


def responses_bodies(provider: RunningProvider) -> list[dict]:
    return [r["body"] for r in provider.requests() if r["path"] == "/v1/responses"]


@pytest.mark.slow
def test_installed_version_and_install_is_idempotent(
    codex_installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = CodexBase()
    assert base.installed_version(codex_installed) == "0.169.0"
    assert install_commands(base, codex_installed, monkeypatch) == []  # already there: no npm run
    assert base.installed_version(codex_installed.parent / "nowhere") is None


@pytest.mark.slow
def test_config_passes_strict_validation(env: LiveBase) -> None:
    invocation = env.base.prepare(env.spec("x"))
    assert invocation.argv == [binary_path(str(env.tools)), "app-server"]
    result = subprocess.run(
        [*invocation.argv, "--strict-config", "--print-startup-config"],
        env=invocation.env,
        cwd=invocation.cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"appServerVersion":"0.169.0"' in result.stdout


@pytest.mark.slow
async def test_text_streams_real_deltas(env: LiveBase) -> None:
    turn = await env.run("SAY hello world, this is streamed", capture="text")
    deltas = turn.of(ev.TextDelta)
    assert len(deltas) > 1
    assert "".join(d.delta for d in deltas) == "hello world, this is streamed"
    assert turn.text == "hello world, this is streamed"
    assert isinstance(turn.events[-1], ev.TurnFinished)
    assert turn.events[0] == ev.NativeSession(turn.native_id)
    usage = turn.of(ev.Usage)
    assert usage and usage[-1].input_tokens > 0 and usage[-1].output_tokens > 0
    request = env.provider.requests()[-1]
    assert request["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert request["body"]["model"] == "gpt-test"


@pytest.mark.slow
async def test_tool_call(env: LiveBase) -> None:
    turn = await env.run("RUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert started.name == "shell"
    assert "echo hi" in json.loads(started.arguments)["command"]
    assert finished.call == started.call
    assert finished.output == "hi\n" and finished.ok
    assert turn.text == "got hi"
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_failed_command_is_not_ok(env: LiveBase) -> None:
    turn = await env.run("RUN exit 3\nSAY done")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok


@pytest.mark.slow
async def test_reasoning_summary(env: LiveBase) -> None:
    turn = await env.run("THINK plan the work carefully\nSAY x", capture="reasoning")
    deltas = turn.of(ev.ReasoningDelta)
    (done,) = turn.of(ev.ReasoningDone)
    assert deltas and "".join(d.delta for d in deltas) == done.text
    assert done.text == "plan the work carefully"
    assert turn.text == "x"
    assert responses_bodies(env.provider)[0]["reasoning"]["summary"] == "auto"


@pytest.mark.slow
async def test_resume_remembers(env: LiveBase) -> None:
    first = await env.run("REMEMBER apple")
    assert first.text == "noted apple"
    second = await env.run("RECALL", native_session_id=first.native_id, capture="resume")
    assert second.native_id == first.native_id
    assert second.text == "you said apple"
    assert not second.of(ev.Notice)
    # The usage of the resumed turn is its own, not the thread's running total.
    assert second.of(ev.Usage)[-1].input_tokens <= 2 * first.of(ev.Usage)[-1].input_tokens


@pytest.mark.slow
async def test_resume_of_lost_transcript_starts_fresh(env: LiveBase) -> None:
    turn = await env.run("SAY fresh", native_session_id="01a22b3c-0000-7000-8000-000000000000")
    assert turn.events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert turn.native_id != "01a22b3c-0000-7000-8000-000000000000"
    assert turn.text == "fresh"


@pytest.mark.slow
async def test_provider_failure(env: LiveBase) -> None:
    turn = await env.run("FAIL 400 bad", capture="provider_failure")
    assert turn.events[-1] == ev.TurnFailed("bad", "provider_error")
    assert len(responses_bodies(env.provider)) == 1  # a 400 is not retried


def outcome_line(turn: DirectTurn) -> tuple[float, dict]:
    """When and what the CLI reported as the turn's outcome (turn/completed)."""
    ((stamp, msg),) = [
        (stamp, msg)
        for stamp, line in turn.proc.stdout
        if (msg := json.loads(line)).get("method") == "turn/completed"
    ]
    return stamp, msg["params"]["turn"]


@pytest.mark.slow
async def test_interrupt_stops_slow_turn(env: LiveBase) -> None:
    turn = await env.run(
        "SLOW 10\nSAY " + "word " * 40,
        interrupt_when=lambda t: t.first_text_at is not None,
        capture="interrupted",
    )
    assert turn.interrupted_at is not None
    stamp, outcome = outcome_line(turn)
    assert outcome["status"] == "interrupted"
    assert stamp - turn.interrupted_at < 2
    # Interrupted: no outcome event (the engine asked for it), and the CLI exited.
    assert not [e for e in turn.events if isinstance(e, OUTCOMES)]
    assert turn.proc.returncode is not None


@pytest.mark.slow
async def test_interrupt_stops_a_tool_loop(env: LiveBase) -> None:
    # What the engine does at a spent max_step: interrupt at the next tool call.
    turn = await env.run("LOOP", interrupt_when=lambda t: len(t.of(ev.ToolCallStarted)) == 3)
    assert turn.interrupted_at is not None
    stamp, outcome = outcome_line(turn)
    assert outcome["status"] == "interrupted"
    assert stamp - turn.interrupted_at < 2
    assert len(turn.of(ev.ToolCallStarted)) <= 4


@pytest.mark.slow
async def test_tool_env_has_no_gateway_token(env: LiveBase) -> None:
    turn = await env.run("RUN env\nSAY {output}")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert "HOME=" in finished.output
    assert TOKEN_ENV not in finished.output
    assert PROVIDER_KEY not in finished.output


@pytest.mark.slow
async def test_system_prompt_and_disabled_tools_reach_the_model(env: LiveBase) -> None:
    await env.run(
        "SAY ok",
        system_prompt="Always answer like a pirate.",
        disabled_tools=("web_search", "view_image"),
    )
    body = json.dumps(responses_bodies(env.provider)[0])
    assert "Always answer like a pirate." in body
    assert "Do not use these tools: web_search, view_image." in body
    assert not (env.workspace / "AGENTS.md").exists()


@pytest.mark.slow
async def test_changed_instructions_reach_a_resumed_thread(env: LiveBase) -> None:
    first = await env.run("SAY one", system_prompt="Alpha rule.")
    same = await env.run("SAY two", system_prompt="Alpha rule.", native_session_id=first.native_id)
    changed = await env.run(
        "SAY three",
        system_prompt="Beta rule.",
        disabled_tools=("web_search",),
        native_session_id=first.native_id,
    )
    assert changed.text == "three"
    bodies = [json.dumps(body) for body in responses_bodies(env.provider)]
    assert all(UPDATE_PREFIX not in body for body in bodies[:2])  # unchanged: not repeated
    assert bodies[2].count("Alpha rule.") == 1
    assert f"{UPDATE_PREFIX} Follow these instead:\\n\\nBeta rule.\\n\\n" in bodies[2]
    assert "Do not use these tools: web_search." in bodies[2]
    assert same.text == "two"


@pytest.mark.slow
async def test_long_prompt_over_stdin(env: LiveBase) -> None:
    filler = "x" * (200 * 1024)
    turn = await env.run(f"SAY long ok\n{filler}")
    assert turn.text == "long ok"
    assert filler in json.dumps(responses_bodies(env.provider)[0])


# -- fast: prepare, and the driver against replayed real output (no CLI) ----------------------


def fast_spec(tmp_path: Path, **kw: object) -> TurnSpec:
    fields: dict = {
        "prompt": "SAY hi",
        "model": "gpt-test",
        "gateway_url": "http://gateway.invalid/gateway/openai/v1",
        "gateway_token": "uhp-turn-token",
        "host_workspace": tmp_path / "ws",
        "host_home": tmp_path / "home",
        "host_tools": tmp_path / "tools",
    }
    return TurnSpec(**{**fields, **kw})


def test_prepare_builds_env_from_nothing_and_writes_config(tmp_path: Path) -> None:
    invocation = CodexBase().prepare(fast_spec(tmp_path))
    bin_dir = binary_path("/opt/uhp-tools").rsplit("/bin/", 1)[0]
    assert SYSTEM_PATH == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert invocation.argv == [binary_path("/opt/uhp-tools"), "app-server"]
    assert invocation.cwd == "/workspace"
    assert invocation.env == {
        "PATH": f"{bin_dir}/codex-path:{SYSTEM_PATH}",
        "HOME": "/home/agent",
        "CODEX_HOME": "/home/agent/.codex",
        "UHP_GATEWAY_TOKEN": "uhp-turn-token",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    config = tomllib.loads((tmp_path / "home" / ".codex" / "config.toml").read_text())
    assert config["model"] == "gpt-test"
    assert config["model_provider"] == "uhp_gateway"
    assert config["model_providers"]["uhp_gateway"] == {
        "name": "UHP gateway",
        "base_url": "http://gateway.invalid/gateway/openai/v1",
        "env_key": "UHP_GATEWAY_TOKEN",
        "wire_api": "responses",
        "request_max_retries": 2,
        "stream_max_retries": 2,
    }
    assert config["shell_environment_policy"]["exclude"] == ["UHP_GATEWAY_TOKEN"]
    assert config["features"]["plugins"] is False
    assert "uhp-turn-token" not in json.dumps(config)
    # Rewritten every turn.
    CodexBase().prepare(fast_spec(tmp_path, model="gpt-test-mini"))
    config = tomllib.loads((tmp_path / "home" / ".codex" / "config.toml").read_text())
    assert config["model"] == "gpt-test-mini"


def test_binary_path_follows_the_machine() -> None:
    assert binary_path("/t", "x86_64") == (
        "/t/codex/0.169.0/node_modules/@openai/codex-linux-x64/vendor/"
        "x86_64-unknown-linux-musl/bin/codex"
    )
    assert binary_path("/t", "aarch64") == (
        "/t/codex/0.169.0/node_modules/@openai/codex-linux-arm64/vendor/"
        "aarch64-unknown-linux-musl/bin/codex"
    )


class ReplayProcess:
    """Plays captured app-server stdout back; a response waits until its request was sent,
    and stdout ends when stdin is closed (as app-server does)."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines
        self.written: list[dict] = []
        self._wrote = asyncio.Event()
        self._stdin_closed = asyncio.Event()

    async def write(self, data: bytes) -> None:
        if self._stdin_closed.is_set():
            raise BrokenPipeError("stdin closed")
        self.written += [json.loads(line) for line in data.splitlines()]
        self._wrote.set()

    async def close_stdin(self) -> None:
        self._stdin_closed.set()

    async def lines(self) -> AsyncIterator[bytes]:
        for line in self._lines:
            msg = json.loads(line)
            if "result" in msg or "error" in msg:
                while not any(w.get("id") == msg["id"] and "method" in w for w in self.written):
                    self._wrote.clear()
                    await self._wrote.wait()
            yield line.encode()
        await self._stdin_closed.wait()

    def stderr_tail(self) -> str:
        return ""

    def requests(self) -> list[dict]:
        return [w for w in self.written if "method" in w]


def fixture_lines(name: str) -> list[str]:
    return (FIXTURES / f"{name}.jsonl").read_text().splitlines()


async def drive_all(proc: ReplayProcess, spec: TurnSpec, base: CodexBase | None = None) -> list:
    events = []
    async with asyncio.timeout(10):
        async for event in (base or CodexBase()).start_turn(proc, spec).events():
            events.append(event)
    return events


async def test_driver_sends_the_exact_protocol(tmp_path: Path) -> None:
    proc = ReplayProcess(fixture_lines("tool_call"))
    spec = fast_spec(tmp_path, system_prompt="Be brief.", disabled_tools=("web_search",))
    events = await drive_all(proc, spec)
    assert [r["method"] for r in proc.requests()] == [
        "initialize",
        "initialized",
        "thread/start",
        "turn/start",
    ]
    init, initialized, start, turn = proc.requests()
    assert init["params"]["clientInfo"]["name"] == "uhp-server"
    assert "id" not in initialized
    assert start["params"] == {
        "cwd": "/workspace",
        "model": "gpt-test",
        "approvalPolicy": "never",
        "sandbox": "danger-full-access",
        "developerInstructions": "Be brief.\n\nDo not use these tools: web_search.",
    }
    thread_id = json.loads(fixture_lines("tool_call")[2])["result"]["thread"]["id"]
    assert turn["params"] == {
        "threadId": thread_id,
        "input": [{"type": "text", "text": "SAY hi", "text_elements": []}],
    }
    assert events[0] == ev.NativeSession(thread_id)
    assert isinstance(events[-1], ev.TurnFinished)
    assert [type(e) for e in events].count(ev.ToolCallStarted) == 1


async def test_driver_declines_server_requests(tmp_path: Path) -> None:
    lines = fixture_lines("text")
    approval = {
        "id": 0,
        "method": "item/commandExecution/requestApproval",
        "params": {"threadId": "t", "turnId": "u", "itemId": "i"},
    }
    refresh = {"id": 1, "method": "account/chatgptAuthTokens/refresh", "params": {}}
    at = next(i for i, line in enumerate(lines) if '"turn/started"' in line)
    lines[at:at] = [json.dumps(approval), json.dumps(refresh)]
    proc = ReplayProcess(lines)
    events = await drive_all(proc, fast_spec(tmp_path))
    answers = [w for w in proc.written if "method" not in w]
    assert answers[0] == {"id": 0, "result": {"decision": "decline"}}
    assert answers[1]["id"] == 1 and answers[1]["error"]["code"] == -32601
    assert isinstance(events[-1], ev.TurnFinished)


async def test_driver_starts_fresh_when_resume_fails(tmp_path: Path) -> None:
    # The captured fresh run, renumbered behind a failed thread/resume (id 2).
    lines = []
    for line in fixture_lines("text"):
        msg = json.loads(line)
        if "result" in msg and msg["id"] >= 2:
            msg["id"] += 1
        lines.append(json.dumps(msg))
    gone = {"id": 2, "error": {"code": -32600, "message": "no rollout found for thread id x"}}
    lines.insert(1, json.dumps(gone))
    proc = ReplayProcess(lines)
    events = await drive_all(proc, fast_spec(tmp_path, native_session_id="x"))
    methods = [r["method"] for r in proc.requests()]
    assert methods == ["initialize", "initialized", "thread/resume", "thread/start", "turn/start"]
    resume = proc.requests()[2]["params"]
    assert resume["threadId"] == "x" and resume["excludeTurns"] is True
    assert events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert isinstance(events[1], ev.NativeSession)
    assert isinstance(events[-1], ev.TurnFinished)


async def test_interrupt_sends_turn_interrupt(tmp_path: Path) -> None:
    lines = fixture_lines("interrupted")
    base = CodexBase()
    proc = ReplayProcess(lines)
    agent_turn = base.start_turn(proc, fast_spec(tmp_path))
    agen = agent_turn.events()
    first_text = None
    async with asyncio.timeout(10):
        async for event in agen:
            if isinstance(event, ev.TextDelta):
                first_text = event
                break
        assert first_text is not None
        assert await agent_turn.interrupt()
        rest = [e async for e in agen]
    (interrupt,) = [r for r in proc.requests() if r["method"] == "turn/interrupt"]
    turn_id = next(
        m["result"]["turn"]["id"]
        for m in map(json.loads, lines)
        if "turn" in (m.get("result") or {})
    )
    assert interrupt["params"]["turnId"] == turn_id
    assert not [e for e in rest if isinstance(e, OUTCOMES)]
    assert not await agent_turn.interrupt()  # the turn is gone


async def test_stdout_eof_before_outcome(tmp_path: Path) -> None:
    lines = fixture_lines("text")
    cut = next(i for i, line in enumerate(lines) if '"turn/started"' in line)
    proc = ReplayProcess(lines[: cut + 1])
    proc._stdin_closed.set()  # stdout ends right after the replayed lines
    events = await drive_all(proc, fast_spec(tmp_path))
    assert events[-1] == ev.TurnFailed("the agent exited unexpectedly", "harness_error")


async def test_cli_dying_during_setup(tmp_path: Path) -> None:
    proc = ReplayProcess([])
    proc._stdin_closed.set()
    events = await drive_all(proc, fast_spec(tmp_path))
    assert events == [ev.TurnFailed("the agent exited unexpectedly", "harness_error")]


def test_instruction_updates() -> None:
    assert update_message("a", "a") is None
    assert update_message(None, None) is None and update_message("", None) is None
    assert update_message(None, "new") == f"{UPDATE_PREFIX} Follow these instead:\n\nnew"
    assert update_message("old", None) == UPDATE_PREFIX


async def test_interrupt_before_the_turn_exists(tmp_path: Path) -> None:
    base = CodexBase()
    proc = ReplayProcess(fixture_lines("text"))
    events = []
    async with asyncio.timeout(10):
        agent_turn = base.start_turn(proc, fast_spec(tmp_path))
        async for event in agent_turn.events():
            events.append(event)
            if isinstance(event, ev.NativeSession):
                assert await agent_turn.interrupt()
    assert [type(e) for e in events] == [ev.NativeSession]
    assert "turn/start" not in [r["method"] for r in proc.requests()]


async def test_unencodable_prompt_text_is_replaced_not_fatal(tmp_path: Path) -> None:
    proc = ReplayProcess(fixture_lines("text"))
    await drive_all(proc, fast_spec(tmp_path, prompt="SAY hi \ud800"))
    (turn,) = [r for r in proc.requests() if r["method"] == "turn/start"]
    assert turn["params"]["input"][0]["text"] == "SAY hi ?"
