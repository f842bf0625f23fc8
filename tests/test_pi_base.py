"""PiBase against the real pinned Pi CLI and the scripted provider (no sandbox), plus fast
checks of prepare() and of the parser on replayed real output.

The CLI comes from the `pi_installed` fixture (PiBase.install into the tools cache, once
per machine). Set UHP_CAPTURE_PI_FIXTURES=1 to rewrite the parser fixtures in
harness_bases/pi/fixtures/ from these live runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases import node_runtime
from harness_bases.base import (
    McpServerSpec,
    PluginPackage,
    SandboxPaths,
    SkillBundle,
    SkillFile,
    StdioServer,
    StdioServerSpec,
    TurnSpec,
)
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.pi import PiBase
from harness_bases.pi import config as pi_config
from harness_bases.plugin_folders import place_plugins, plugin_data, plugin_root, stdio_launches
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.direct_turn import OUTCOMES, DirectTurn
from tests.support.installs import install_commands
from tests.support.live_base import LiveBase, capturing, chat_bodies, offered_tools, system_text
from tests.support.mcp_server import ANSWER_PREFIX, RunningMcpServer
from tests.support.plugins import STDIO_SERVER
from tests.support.sandbox_processes import processes_naming
from tests.support.stdio_mcp_server import ANSWER_PREFIX as STAMP_PREFIX

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "pi" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_PI_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def pi_installed() -> Path:
    """The pinned Pi CLI and its node, installed once (CI installs them before the tests)."""
    return installed_tools("pi")


@pytest.fixture
def env(pi_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(PiBase(), provider, pi_installed, tmp_path, timeout=90, fixtures=CAPTURE)


# -- live: the real CLI -----------------------------------------------------------------------


@pytest.mark.slow
def test_installed_version_and_install_is_idempotent(
    pi_installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = PiBase()
    assert base.installed_version(pi_installed) == "0.73.1"
    assert node_runtime.installed_version(pi_installed) == node_runtime.NODE_VERSION
    assert install_commands(base, pi_installed, monkeypatch) == []  # already there: no npm run
    assert base.installed_version(pi_installed.parent / "nowhere") is None


@pytest.mark.slow
def test_every_flag_is_one_the_pinned_cli_knows(env: LiveBase) -> None:
    env.home.joinpath(".pi/agent/sessions").mkdir(parents=True)
    env.home.joinpath(".pi/agent/sessions/t_01a22ca3-9914-75cd-b695-94688d6d86c6.jsonl").touch()
    spec = env.spec(
        "x",
        system_prompt="p",
        disabled_tools=("bash",),
        native_session_id="01a22ca3-9914-75cd-b695-94688d6d86c6",
    )
    invocation = env.base.prepare(spec)
    help_text = subprocess.run(
        [*invocation.argv[:2], "--help"], env=invocation.env, capture_output=True, text=True
    )
    text = help_text.stdout + help_text.stderr
    flags = [a for a in invocation.argv[2:] if a.startswith("--")]
    assert {"--session", "--append-system-prompt", "--tools"} <= set(flags)
    for flag in flags:
        assert re.search(rf"^\s+{re.escape(flag)}\b", text, re.M), flag


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
    (request,) = [r for r in env.provider.requests() if r["path"] == "/v1/chat/completions"]
    assert request["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert request["body"]["model"] == MODEL and request["body"]["stream"] is True
    assert turn.proc.returncode == 0  # stdin closed after agent_end: Pi exits by itself


@pytest.mark.slow
async def test_tool_call(env: LiveBase) -> None:
    turn = await env.run("RUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert started.name == "bash"
    assert json.loads(started.arguments) == {"command": "echo hi"}
    assert finished == ev.ToolCallFinished(started.call, "hi\n", True)
    assert turn.text == "got hi"
    kinds = [type(e) for e in turn.events]
    assert kinds.index(ev.ToolCallStarted) < kinds.index(ev.ToolCallFinished)
    assert kinds.index(ev.ToolCallFinished) < kinds.index(ev.TextDone)
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_failed_command_is_not_ok(env: LiveBase) -> None:
    turn = await env.run("RUN exit 3\nSAY done")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_thinking_streams_as_reasoning_closed_before_the_text(env: LiveBase) -> None:
    turn = await env.run("THINK plan the work carefully\nSAY x", capture="thinking")
    deltas = turn.of(ev.ReasoningDelta)
    (done,) = turn.of(ev.ReasoningDone)
    assert len(deltas) > 1 and "".join(d.delta for d in deltas) == done.text
    assert done.text == "plan the work carefully"
    kinds = [type(e) for e in turn.events]
    # Pi itself ends the thinking block after the text; the parser closes it first.
    assert kinds.index(ev.ReasoningDone) < kinds.index(ev.TextDelta)
    assert turn.text == "x"


@pytest.mark.slow
async def test_resume_remembers(env: LiveBase) -> None:
    first = await env.run("REMEMBER apple")
    assert first.text == "noted apple"
    second = await env.run("RECALL", native_session_id=first.native_id, capture="resume")
    assert second.native_id == first.native_id
    assert second.text == "you said apple"
    assert not second.of(ev.Notice)


@pytest.mark.slow
async def test_resume_of_a_lost_session_starts_fresh_and_says_so(env: LiveBase) -> None:
    first = await env.run("REMEMBER pear")
    shutil.rmtree(env.home / ".pi" / "agent" / "sessions")
    turn = await env.run("RECALL", native_session_id=first.native_id)
    assert turn.events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert turn.native_id != first.native_id
    assert turn.text == "nothing to recall"
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_provider_failure(env: LiveBase) -> None:
    turn = await env.run("FAIL 400 bad request words", capture="provider_failure")
    assert turn.events[-1] == ev.TurnFailed("bad request words", "provider_error")
    assert not turn.of(ev.TextDone)


@pytest.mark.slow
async def test_server_error_is_retried_briefly(env: LiveBase) -> None:
    started = time.monotonic()
    turn = await env.run("FAIL 500 upstream exploded")
    assert turn.events[-1] == ev.TurnFailed("upstream exploded", "provider_error")
    assert len(chat_bodies(env.provider)) == 3  # two retries
    assert time.monotonic() - started < 30


@pytest.mark.slow
async def test_interrupt_stops_slow_text_and_the_session_resumes(env: LiveBase) -> None:
    turn = await env.run(
        "SLOW 10\nSAY " + "word " * 40,
        interrupt_when=lambda t: t.first_text_at is not None,
        capture="interrupted",
    )
    assert turn.interrupted_at is not None
    stamp = next(s for s, line in turn.proc.stdout if b'"type":"agent_end"' in line)
    assert stamp - turn.interrupted_at < 3
    # Interrupted: no outcome event (the engine asked for it and knows), the partial text
    # is kept, and the CLI exited.
    assert not [e for e in turn.events if isinstance(e, OUTCOMES)]
    assert turn.text.startswith("word") and len(turn.text) < len("word " * 40)
    assert turn.proc.returncode is not None
    again = await env.run("SAY after the cancel", native_session_id=turn.native_id)
    assert again.native_id == turn.native_id and not again.of(ev.Notice)
    assert again.text == "after the cancel"


@pytest.mark.slow
async def test_interrupt_stops_a_running_tool(env: LiveBase) -> None:
    turn = await env.run(
        "RUN python3 -c 'import time; time.sleep(30)'; echo late\nSAY x",
        interrupt_when=lambda t: bool(t.of(ev.ToolCallStarted)),
    )
    assert turn.interrupted_at is not None
    assert time.monotonic() - turn.interrupted_at < 10
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok and "late" not in finished.output
    assert not [e for e in turn.events if isinstance(e, OUTCOMES)]


@pytest.mark.slow
async def test_tool_commands_do_not_inherit_credentials(env: LiveBase) -> None:
    turn = await env.run("RUN env\nSAY {output}")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert "HOME=" in finished.output
    for leaked in ("UHP_", PROVIDER_KEY):
        assert leaked not in finished.output


@pytest.mark.slow
async def test_disabled_tool_is_blocked_hard_and_back_when_enabled(env: LiveBase) -> None:
    call_bash = 'TOOL bash {"command": "echo ran"}\nSAY {output}'
    enabled = await env.run(call_bash)
    assert enabled.of(ev.ToolCallFinished)[0].output == "ran\n"
    env.provider.reset()
    blocked = await env.run(
        call_bash, native_session_id=enabled.native_id, disabled_tools=("bash",), capture="denied"
    )
    (started,) = blocked.of(ev.ToolCallStarted)
    (finished,) = blocked.of(ev.ToolCallFinished)
    assert started.name == "bash"  # the scripted model really called it
    assert not finished.ok and "bash" in finished.output and "ran" not in finished.output
    assert blocked.text == finished.output  # the task says so
    bodies = chat_bodies(env.provider)
    assert all("bash" not in offered_tools(body) for body in bodies)
    assert "read" in offered_tools(bodies[0])
    env.provider.reset()
    again = await env.run(call_bash, native_session_id=enabled.native_id)
    assert again.of(ev.ToolCallFinished)[0].output == "ran\n"
    assert "bash" in offered_tools(chat_bodies(env.provider)[0])


@pytest.mark.slow
async def test_system_prompt_reaches_the_model_and_follows_each_turn(env: LiveBase) -> None:
    first = await env.run("SAY one", system_prompt="Always answer like a pirate 7731.")
    await env.run("SAY two", system_prompt="Beta rule 8842.", native_session_id=first.native_id)
    await env.run("SAY three", native_session_id=first.native_id)
    systems = [system_text(body) for body in chat_bodies(env.provider)]
    assert "pirate 7731" in systems[0]
    assert "Beta rule 8842" in systems[1] and "pirate 7731" not in systems[1]
    assert "Beta rule" not in systems[2] and "pirate" not in systems[2]
    assert not (env.workspace / "AGENTS.md").exists()


@pytest.mark.slow
async def test_long_prompt_over_stdin(env: LiveBase) -> None:
    filler = "x" * (200 * 1024)
    turn = await env.run(f"SAY long ok\n{filler}")
    assert turn.text == "long ok"
    assert filler in json.dumps(chat_bodies(env.provider)[0])


@pytest.mark.slow
async def test_skills_are_found_listed_and_loaded(env: LiveBase) -> None:
    skill = SkillBundle(
        "uhp-zebra",
        (
            SkillFile(
                "SKILL.md",
                b"---\nname: uhp-zebra\ndescription: Knows the zebra-42 word.\n---\n\n"
                b"The secret word is zebra-42. Details in notes/more.txt.\n",
            ),
            SkillFile("notes/more.txt", b"more zebra\n"),
        ),
    )
    folder = env.home / ".pi" / "agent" / "skills" / "uhp-zebra"
    read = json.dumps({"path": str(folder / "SKILL.md")})
    turn = await env.run(f"TOOL read {read}\nSAY {{output}}", skills=(skill,))
    assert "Knows the zebra-42 word." in system_text(chat_bodies(env.provider)[0])
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok and "secret word is zebra-42" in finished.output
    assert (folder / "notes" / "more.txt").read_bytes() == b"more zebra\n"
    env.provider.reset()
    await env.run("SAY gone", native_session_id=turn.native_id)  # the skill is disabled
    assert not folder.exists()
    assert "zebra-42 word" not in system_text(chat_bodies(env.provider)[0])


def _mcp_spec(url: str, token: str = "mcp-tok-1") -> McpServerSpec:
    return McpServerSpec(name="vault", url=url, bearer_token=token)


@pytest.mark.slow
async def test_mcp_server_is_reached_with_its_bearer_token(env: LiveBase) -> None:
    server = RunningMcpServer("http").start()
    try:
        turn = await env.run(
            'TOOL mcp__vault__lookup {"code": "abc"}\nSAY {output}',
            mcp_servers=(_mcp_spec(server.url),),
        )
    finally:
        server.stop()
    assert "mcp__vault__lookup" in offered_tools(chat_bodies(env.provider)[0])
    (started,) = turn.of(ev.ToolCallStarted)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert started.name == "mcp__vault__lookup" and json.loads(started.arguments) == {"code": "abc"}
    assert finished.ok and finished.output == ANSWER_PREFIX + "abc"
    assert turn.text == ANSWER_PREFIX + "abc" and not turn.of(ev.Notice)
    assert {r.headers.get("authorization") for r in server.requests} == {"Bearer mcp-tok-1"}
    for path in (env.home / ".pi").rglob("*"):
        if path.is_file():
            assert "mcp-tok-1" not in path.read_text(errors="replace")


@pytest.mark.slow
async def test_an_unreachable_mcp_server_is_a_notice_not_a_failure(env: LiveBase) -> None:
    turn = await env.run("SAY still fine", mcp_servers=(_mcp_spec("http://127.0.0.1:9/mcp"),))
    assert ev.Notice("The MCP server vault could not be started.") in turn.events
    assert turn.text == "still fine" and isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_disabled_tools_and_mcp_tools_together(env: LiveBase) -> None:
    server = RunningMcpServer("http").start()
    try:
        mcp = (_mcp_spec(server.url),)
        await env.run("SAY x", mcp_servers=mcp, disabled_tools=("bash",))
        offered = offered_tools(chat_bodies(env.provider)[0])
        assert "mcp__vault__lookup" in offered and "bash" not in offered
        assert "grep" not in offered  # the tools Pi leaves off stay off
        env.provider.reset()
        call = 'TOOL mcp__vault__lookup {"code": "abc"}\nSAY {output}'
        blocked = await env.run(call, mcp_servers=mcp, disabled_tools=("mcp__vault__lookup",))
    finally:
        server.stop()
    offered = offered_tools(chat_bodies(env.provider)[0])
    assert "mcp__vault__lookup" not in offered and "bash" in offered
    (finished,) = blocked.of(ev.ToolCallFinished)
    assert not finished.ok and ANSWER_PREFIX not in finished.output


def _plugin(*servers: StdioServer) -> PluginPackage:
    """A plugin shipping the stamp server (tests/support/stdio_mcp_server.py)."""
    files = (
        SkillFile("plugin.json", b'{"name": "demo-plugin"}'),
        SkillFile("bin/stamp", STDIO_SERVER.encode(), executable=True),
    )
    return PluginPackage("demo-plugin", files, servers)


async def _plugin_turn(env: LiveBase, prompt: str, plugin: PluginPackage) -> DirectTurn:
    """A turn with `plugin` placed in the home first, as the engine does."""
    paths = SandboxPaths(str(env.workspace), str(env.home), str(env.tools))
    fields: dict = {"plugins": (plugin,), "stdio_servers": stdio_launches((plugin,), paths)}
    place_plugins(env.spec(prompt, **fields))
    return await env.run(prompt, **fields)


@pytest.mark.slow
async def test_a_plugin_s_stdio_server_runs_inside_pi_and_ends_with_it(env: LiveBase) -> None:
    stamp = StdioServer("stamp", "./bin/stamp", args=("--data", "${PLUGIN_DATA}/x"))
    turn = await _plugin_turn(
        env, 'TOOL mcp__stamp__stamp {"word": "pi"}\nSAY {output}', _plugin(stamp)
    )
    assert "mcp__stamp__stamp" in offered_tools(chat_bodies(env.provider)[0])
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok and finished.output.startswith(STAMP_PREFIX + "pi "), finished.output
    facts = json.loads(finished.output.removeprefix(STAMP_PREFIX + "pi "))
    root, data = (
        plugin_root(str(env.home), "demo-plugin"),
        plugin_data(str(env.home), "demo-plugin"),
    )
    assert (facts["root"], facts["data"], facts["cwd"]) == (root, data, root)
    assert facts["argv"] == ["--data", f"{data}/x"]
    # Pi holds the turn token and the MCP tokens; the plugin's process gets none of them.
    assert not [name for name in facts["env"] if name.startswith("UHP_")]
    assert not turn.of(ev.Notice)
    # The server was Pi's child: gone once Pi is.
    deadline = time.monotonic() + 5
    while processes_naming(f"{env.home}/.uhp/plugin-servers") and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert processes_naming(f"{env.home}/.uhp/plugin-servers") == []


# A stdio server that lists one tool and exits when it is called, answering nothing.
DIES_ON_CALL = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "tools/call":
        sys.exit(3)
    if message.get("id") is None:
        continue
    tool = {"name": "stamp", "inputSchema": {"type": "object"}}
    result = {"tools": [tool]} if message["method"] == "tools/list" else {"capabilities": {}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


@pytest.mark.slow
async def test_a_stdio_server_that_dies_fails_its_calls_and_the_turn_goes_on(
    env: LiveBase,
) -> None:
    dies = StdioServer("dies", "python3", args=("-c", DIES_ON_CALL))
    call = 'TOOL mcp__dies__stamp {"word": "x"}'
    turn = await _plugin_turn(env, f"{call}\n{call}\nSAY carried on", _plugin(dies))
    first, second = turn.of(ev.ToolCallFinished)
    assert not first.ok and "exited" in first.output, first.output
    assert not second.ok and "exited" in second.output  # at once: the process is gone
    assert turn.text == "carried on" and isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_a_plugin_s_stdio_server_that_cannot_start_is_a_notice(env: LiveBase) -> None:
    missing = StdioServer("missing", "no-such-command-uhp")
    turn = await _plugin_turn(env, "SAY still fine", _plugin(missing))
    assert ev.Notice("The MCP server missing could not be started.") in turn.events
    assert turn.text == "still fine" and isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_the_cli_connects_to_nothing_but_the_gateway(env: LiveBase) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("SKIPPED LOUDLY: no strace here, so the CLI's connections cannot be traced")
    trace = env.home.parent / "connect.trace"
    wrap = [strace, "-f", "-qq", "-e", "trace=connect", "-o", str(trace)]
    turn = await env.run("RUN echo hi\nSAY {output}", wrap=wrap)
    assert turn.text == "hi"
    port = env.provider.url.rsplit(":", 1)[1]
    inet = [line for line in trace.read_text().splitlines() if "AF_INET" in line]
    assert inet, "no connection traced at all"
    for line in inet:
        assert f"htons({port})" in line and "127.0.0.1" in line, line


# -- fast: prepare, and the parser on replayed real output (no CLI) ---------------------------


def fast_spec(tmp_path: Path, **kw: object) -> TurnSpec:
    fields: dict = {
        "prompt": "SAY hi",
        "model": MODEL,
        "gateway_url": "http://gateway.invalid/gateway/openai/v1",
        "gateway_token": "uhpgw_turn_token",
        "host_workspace": tmp_path / "ws",
        "host_home": tmp_path / "home",
        "host_tools": tmp_path / "tools",
    }
    return TurnSpec(**{**fields, **kw})


def test_prepare_builds_env_from_nothing_and_the_exact_command(tmp_path: Path) -> None:
    invocation = PiBase().prepare(fast_spec(tmp_path))
    assert invocation.cwd == "/workspace"
    assert invocation.env == {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/home/agent",
        "PI_CODING_AGENT_DIR": "/home/agent/.pi/agent",
        "UHP_GATEWAY_TOKEN": "uhpgw_turn_token",
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    assert invocation.argv == [
        node_runtime.node_path("/opt/uhp-tools"),
        "/opt/uhp-tools/pi/0.73.1/node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
        "--mode",
        "rpc",
        "--provider",
        "uhp",
        "--model",
        MODEL,
        "--session-dir",
        "/home/agent/.pi/agent/sessions",
        "--no-extensions",
        "--no-prompt-templates",
        "--no-themes",
    ]


def test_config_names_the_token_never_holds_it(tmp_path: Path) -> None:
    PiBase().prepare(fast_spec(tmp_path, system_prompt="Be brief."))
    agent = tmp_path / "home" / ".pi" / "agent"
    models = json.loads((agent / "models.json").read_text())
    provider = models["providers"]["uhp"]
    assert provider["baseUrl"] == "http://gateway.invalid/gateway/openai/v1"
    assert provider["apiKey"] == "UHP_GATEWAY_TOKEN" and provider["api"] == "openai-completions"
    assert [m["id"] for m in provider["models"]] == [MODEL]
    for path in agent.rglob("*"):
        if path.is_file():
            assert "uhpgw_turn_token" not in path.read_text()
    assert (agent / "uhp" / "system-prompt.md").read_text() == "Be brief."
    settings = json.loads((agent / "settings.json").read_text())
    assert settings["enableInstallTelemetry"] is False
    assert settings["shellCommandPrefix"] == pi_config.SHELL_PREFIX


def test_mcp_servers_go_to_the_extension_by_token_name(tmp_path: Path) -> None:
    server = McpServerSpec("vault", "http://gateway.invalid/gateway/mcp/vault", "mcp-tok-1")
    invocation = PiBase().prepare(fast_spec(tmp_path, mcp_servers=(server,)))
    extension = invocation.argv[invocation.argv.index("--extension") + 1]
    assert extension == "/opt/uhp-tools/pi/0.73.1/uhp-mcp-extension.js"
    assert invocation.env["UHP_PI_MCP_CONFIG"] == "/home/agent/.pi/agent/uhp/mcp.json"
    assert invocation.env["UHP_MCP_TOKEN_0"] == "mcp-tok-1"
    written = (tmp_path / "home" / ".pi" / "agent" / "uhp" / "mcp.json").read_text()
    assert json.loads(written)["servers"] == [
        {"name": "vault", "url": server.url, "tokenEnv": "UHP_MCP_TOKEN_0"}
    ]
    assert "mcp-tok-1" not in written
    assert "--extension" not in PiBase().prepare(fast_spec(tmp_path)).argv


def test_plugin_stdio_servers_go_to_the_extension_as_their_launches(tmp_path: Path) -> None:
    launch = StdioServerSpec(
        "stamp", "python3", ("-I", "/home/agent/.uhp/plugin-servers/launch.py", "x.json"), "p"
    )
    invocation = PiBase().prepare(fast_spec(tmp_path, stdio_servers=(launch,)))
    assert "--extension" in invocation.argv
    assert invocation.env["UHP_PI_MCP_CONFIG"] == "/home/agent/.pi/agent/uhp/mcp.json"
    assert not [name for name in invocation.env if name.startswith("UHP_MCP_TOKEN")]
    written = json.loads((tmp_path / "home" / ".pi" / "agent" / "uhp" / "mcp.json").read_text())
    assert written["servers"] == [
        {"name": "stamp", "command": "python3", "args": list(launch.args)}
    ]
    # Beside a remote server: each its own kind, the remote one's token by name only.
    remote = McpServerSpec("vault", "http://gateway.invalid/gateway/mcp/vault", "mcp-tok-1")
    invocation = PiBase().prepare(
        fast_spec(tmp_path, mcp_servers=(remote,), stdio_servers=(launch,))
    )
    written = json.loads((tmp_path / "home" / ".pi" / "agent" / "uhp" / "mcp.json").read_text())
    assert [s.get("url") or s["command"] for s in written["servers"]] == [remote.url, "python3"]
    assert invocation.env["UHP_MCP_TOKEN_0"] == "mcp-tok-1"


def test_a_plugin_s_skills_are_written_with_the_harness_s(tmp_path: Path) -> None:
    own = SkillBundle("tidy", (SkillFile("SKILL.md", b"# tidy\n"),))
    theirs = SkillBundle(
        "demo-skill",
        (SkillFile("SKILL.md", b"# demo\n"), SkillFile("references/notes.md", b"notes\n")),
        plugin="demo-plugin",
    )
    PiBase().prepare(fast_spec(tmp_path, skills=(own, theirs)))
    skills = tmp_path / "home" / ".pi" / "agent" / "skills"
    assert (skills / "tidy" / "SKILL.md").read_bytes() == b"# tidy\n"
    assert (skills / "demo-skill" / "references" / "notes.md").read_bytes() == b"notes\n"
    PiBase().prepare(fast_spec(tmp_path, skills=(own,)))  # the plugin disabled since
    assert not (skills / "demo-skill").exists()


def test_disabled_tools_become_an_allowlist(tmp_path: Path) -> None:
    argv = PiBase().prepare(fast_spec(tmp_path, disabled_tools=("bash", "edit"))).argv
    assert argv[argv.index("--tools") + 1] == "read,write"
    every = ("read", "bash", "edit", "write")
    assert "--no-tools" in PiBase().prepare(fast_spec(tmp_path, disabled_tools=every)).argv


def test_resume_only_when_the_session_file_is_there(tmp_path: Path) -> None:
    session_id = "01a22ca3-9914-75cd-b695-94688d6d86c6"
    argv = PiBase().prepare(fast_spec(tmp_path, native_session_id=session_id)).argv
    assert "--session" not in argv
    sessions = tmp_path / "home" / ".pi" / "agent" / "sessions"
    (sessions / f"2026-11-30T13-27-28-789Z_{session_id}.jsonl").write_text("{}\n")
    argv = PiBase().prepare(fast_spec(tmp_path, native_session_id=session_id)).argv
    expected = f"/home/agent/.pi/agent/sessions/2026-11-30T13-27-28-789Z_{session_id}.jsonl"
    assert argv[argv.index("--session") + 1] == expected
    # An id that is not Pi's is never turned into a file pattern.
    assert "--session" not in PiBase().prepare(fast_spec(tmp_path, native_session_id="*")).argv


def test_skills_written_whole_and_removed_when_gone(tmp_path: Path) -> None:
    skill = SkillBundle(
        "tidy", (SkillFile("SKILL.md", b"# tidy\n"), SkillFile("bin/run", b"#!/bin/sh\n"))
    )
    PiBase().prepare(fast_spec(tmp_path, skills=(skill,)))
    folder = tmp_path / "home" / ".pi" / "agent" / "skills" / "tidy"
    assert (folder / "SKILL.md").read_bytes() == b"# tidy\n"
    assert os.access(folder / "bin" / "run", os.X_OK)
    PiBase().prepare(fast_spec(tmp_path))
    assert not folder.exists()


def test_links_the_agent_left_in_its_home_are_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    agent = tmp_path / "home" / ".pi" / "agent"
    agent.mkdir(parents=True)
    (agent / "models.json").symlink_to(outside / "models.json")
    (agent / "skills").symlink_to(outside)
    PiBase().prepare(fast_spec(tmp_path))
    assert not (agent / "models.json").is_symlink() and not list(outside.iterdir())
    assert not (agent / "skills").is_symlink()
