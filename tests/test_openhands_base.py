"""The OpenHands CLI base against the real pinned CLI (its ACP server, through our launcher, on
its private Python) and the scripted provider (no sandbox), plus fast checks of prepare().
`UHP_CAPTURE_OPENHANDS_FIXTURES=1` rewrites the parser fixtures
(harness_bases/openhands/fixtures/) from these turns."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import SYSTEM_PATH, McpServerSpec, SkillBundle, SkillFile, TurnSpec
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.openhands import OpenHandsBase
from harness_bases.openhands import config as oh_config
from harness_bases.openhands import install as installer
from harness_bases.python_start import python_argv
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.live_base import LiveBase, capturing, chat_bodies, offered_tools, system_text
from tests.support.mcp_server import RunningMcpServer, assert_vault_answered, vault_turn
from tests.support.plugin_turn import WORD, stamp_turn, stamped

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "openhands" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_OPENHANDS_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def openhands_installed() -> Path:
    return installed_tools("openhands")


@pytest.fixture
def env(openhands_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    # Its start (Python imports of the whole SDK) takes several seconds, more on a busy machine.
    return LiveBase.fresh(
        OpenHandsBase(), provider, openhands_installed, tmp_path, timeout=240, fixtures=CAPTURE
    )


# -- live: the real CLI -----------------------------------------------------------------------


@pytest.mark.heavy
def test_installed_version_and_install_is_idempotent(openhands_installed: Path) -> None:
    assert installer.installed_version(openhands_installed) == installer.CLI_VERSION
    installer.install(openhands_installed)  # already there: a no-op
    assert installer.installed_version(openhands_installed) == installer.CLI_VERSION


# Two commands in a row in the terminal the launcher sets up, with what its buffer holds as the
# second one starts: the prompt the first left (patched), or nothing (the pinned terminal
# dropped it and pressed Enter for another, which could then end the second command early).
TERMINAL_SCRIPT = """
import importlib.util, json, sys, tempfile
spec = importlib.util.spec_from_file_location("launcher", sys.argv[1])
launcher = importlib.util.module_from_spec(spec)
spec.loader.exec_module(launcher)
if sys.argv[2] == "patched":
    launcher._patch_terminal()
from openhands.tools.terminal.definition import TerminalAction
from openhands.tools.terminal.terminal.factory import create_terminal_session
session = create_terminal_session(tempfile.mkdtemp(), terminal_type=launcher.TERMINAL)
session.initialize()
first = session.execute(TerminalAction(command="echo alpha-17")).text
with session.terminal.output_lock:
    left = "".join(session.terminal.output_buffer)
second = session.execute(TerminalAction(command="echo beta-29")).text
session.close()
print(json.dumps({"first": first, "left": left, "second": second}))
"""


def terminal_run(tools: Path, home: Path, patched: bool) -> dict[str, str]:
    argv = [
        *python_argv(installer.CLI.python_path(str(tools))),
        "-c",
        TERMINAL_SCRIPT,
        str(installer.LAUNCHED.source),
        "patched" if patched else "pinned",
    ]
    # The environment a turn's terminal has (OpenHandsBase.prepare): a dumb terminal.
    env = {"PATH": SYSTEM_PATH, "HOME": str(home), "TERM": "dumb", "LANG": "C.UTF-8"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True, env=env)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(answer, dict)
    return answer


@pytest.mark.slow
def test_the_terminal_keeps_the_prompt_a_command_left_for_the_next_one(
    openhands_installed: Path, tmp_path: Path
) -> None:
    # (The pinned terminal without the launcher's patch drops what a command left, but not
    # every time: on a loaded machine the race it loses sometimes goes its way (CI). So only
    # the patched terminal is asserted, whose answer does not depend on timing.)
    patched = terminal_run(openhands_installed, tmp_path, patched=True)
    assert "###PS1END###" in patched["left"] and "\r" not in patched["left"]
    # (Outside the sandbox the host's readline may wrap them in bracketed-paste codes.)
    assert "alpha-17" in patched["first"] and "beta-29" in patched["second"]


@pytest.mark.slow
async def test_text_streams_as_deltas_and_no_call_is_made_behind_the_agents_back(
    env: LiveBase,
) -> None:
    turn = await env.run("SAY hello world", capture="text")
    assert len(turn.of(ev.TextDelta)) > 1 and turn.text == "hello world"
    assert isinstance(turn.outcome, ev.TurnFinished)
    assert not turn.of(ev.ReasoningDelta)  # its system prompt is not echoed as a thought
    assert len(chat_bodies(env.provider)) == 1  # one model call, to Chat Completions
    assert all(r["path"].endswith("/chat/completions") for r in env.provider.requests())


@pytest.mark.slow
async def test_tool_call_and_reasoning(env: LiveBase) -> None:
    turn = await env.run("THINK first this\nRUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    assert started.name == "terminal" and json.loads(started.arguments)["command"] == "echo hi"
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.call == started.call and finished.ok and finished.output.strip() == "hi"
    assert any(done.text == "first this" for done in turn.of(ev.ReasoningDone))
    assert turn.text == "got hi"


@pytest.mark.slow
async def test_failed_command_is_not_ok(env: LiveBase) -> None:
    # Its terminal is one shell for the whole conversation: `exit 3` would end that shell.
    turn = await env.run("RUN sh -c 'exit 3'\nSAY done", capture="tool_failure")
    assert [f.ok for f in turn.of(ev.ToolCallFinished)] == [False]
    assert turn.text == "done"


@pytest.mark.slow
async def test_resume_remembers_and_a_lost_session_starts_fresh(env: LiveBase) -> None:
    first = await env.run("REMEMBER walrus")
    again = await env.run("RECALL", native_session_id=first.native_id, capture="resume")
    assert again.native_id == first.native_id and again.text == "you said walrus"
    lost = await env.run("SAY fresh", native_session_id=str(uuid.uuid4()), capture="resume_missing")
    assert lost.events[0] == ev.Notice(RESUME_FAILED_NOTICE) and lost.text == "fresh"
    assert lost.native_id != first.native_id


@pytest.mark.slow
async def test_provider_failure_is_a_provider_error(env: LiveBase) -> None:
    turn = await env.run("FAIL 400 the upstream refused this", capture="provider_failure")
    assert isinstance(turn.outcome, ev.TurnFailed)
    assert turn.outcome.code == "provider_error"
    assert "the upstream refused this" in turn.outcome.message


@pytest.mark.slow
async def test_interrupt_stops_slow_text_and_the_session_resumes(env: LiveBase) -> None:
    turn = await env.run(
        "SLOW 6\nSAY " + " ".join(f"w{i}" for i in range(40)),
        interrupt_when=lambda t: bool(t.of(ev.TextDelta)),
        capture="interrupted",
    )
    assert turn.interrupted_at is not None and turn.outcome_at is not None
    assert turn.outcome_at - turn.interrupted_at < 5.0
    assert not isinstance(turn.outcome, ev.TurnFinished)
    after = await env.run("SAY after", native_session_id=turn.native_id)
    assert after.text == "after" and not after.of(ev.Notice)


@pytest.mark.slow
async def test_tool_commands_do_not_inherit_credentials(env: LiveBase) -> None:
    # A server that answers: one the agent cannot reach as it starts fails its turn (the
    # engine leaves out a server its probe before the turn could not reach).
    server = RunningMcpServer("http").start()
    try:
        mcp = (McpServerSpec("vault", server.url, "mcp-tok-1"),)
        turn = await env.run("RUN env\nSAY done", mcp_servers=mcp)
    finally:
        server.stop()
    (finished,) = turn.of(ev.ToolCallFinished)
    assert "HOME=" in finished.output
    for leaked in ("UHP_", PROVIDER_KEY, "mcp-tok", "uhpgw"):
        assert leaked not in finished.output


@pytest.mark.slow
async def test_disabled_tool_is_blocked_hard_and_back_when_enabled(env: LiveBase) -> None:
    blocked = await env.run("RUN echo ran\nSAY {output}", disabled_tools=("terminal",))
    assert all("terminal" not in offered_tools(body) for body in chat_bodies(env.provider))
    assert blocked.text == "no shell tool"  # the scripted model found none to call
    # A model that calls it anyway is refused, and the task shows it.
    forced = await env.run(
        'TOOL terminal {"command": "touch proof"}\nSAY {output}',
        disabled_tools=("terminal",),
        native_session_id=blocked.native_id,
    )
    assert not (env.workspace / "proof").exists()
    assert not [f for f in forced.of(ev.ToolCallFinished) if f.ok]
    env.provider.reset()
    again = await env.run("RUN echo ran\nSAY {output}", native_session_id=blocked.native_id)
    assert "terminal" in offered_tools(chat_bodies(env.provider)[0])
    assert again.text.strip() == "ran"


@pytest.mark.slow
async def test_system_prompt_reaches_the_model_and_follows_each_turn(env: LiveBase) -> None:
    """It goes with each user message: a loaded conversation keeps the system message it
    began with, so a resumed session follows each task's own instructions this way."""
    first = await env.run("SAY one", system_prompt="Always answer like a pirate 7731.")
    await env.run("SAY two", system_prompt="Beta rule 8842.", native_session_id=first.native_id)
    bodies = chat_bodies(env.provider)
    assert "pirate 7731" in last_user_text(bodies[0])
    assert "Beta rule 8842" in last_user_text(bodies[-1])
    assert "pirate 7731" not in last_user_text(bodies[-1])
    assert "pirate 7731" not in system_text(bodies[-1])


def last_user_text(body: dict) -> str:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return json.dumps(users[-1]["content"])


@pytest.mark.slow
async def test_skills_are_found_listed_and_read(env: LiveBase) -> None:
    skill = SkillBundle(
        "uhp-zebra",
        (
            SkillFile(
                "SKILL.md",
                b"---\nname: uhp-zebra\ndescription: Knows the zebra-42 word.\n---\n\n"
                b"The secret word is zebra-42.\n",
            ),
            SkillFile("notes/more.txt", b"more zebra\n"),
        ),
    )
    folder = env.home / oh_config.OPENHANDS_DIR / "skills" / "uhp-zebra"
    turn = await env.run(f"RUN cat {folder}/notes/more.txt\nSAY {{output}}", skills=(skill,))
    assert "Knows the zebra-42 word." in json.dumps(chat_bodies(env.provider)[0])
    assert turn.text.strip() == "more zebra"
    await env.run("SAY gone", native_session_id=turn.native_id)  # the skill is disabled
    assert not folder.exists()


@pytest.mark.slow
async def test_mcp_server_is_reached_with_its_bearer_token(env: LiveBase) -> None:
    turn, server = await vault_turn(env, "lookup")
    assert_vault_answered(turn, server)
    turn_file = env.home / oh_config.OPENHANDS_DIR / oh_config.TURN_FILE
    assert "mcp-tok-1" not in turn_file.read_text()


@pytest.mark.slow
async def test_a_plugin_s_stdio_server_runs_in_the_session(env: LiveBase) -> None:
    turn = await stamp_turn(env, "stamp")
    assert stamped(turn, env)["count"] == 1
    assert f"stamped {WORD}" in turn.text  # the answer reached the model


@pytest.mark.slow
async def test_the_cli_connects_to_nothing_but_the_gateway(env: LiveBase) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("SKIPPED LOUDLY: no strace here, so the CLI's connections cannot be traced")
    trace = env.home.parent / "connect.trace"
    wrap = [strace, "-f", "-qq", "-e", "trace=connect", "-o", str(trace)]
    turn = await env.run("RUN echo hi\nSAY {output}", wrap=wrap)
    assert turn.text.startswith("hi")
    lines = trace.read_text().splitlines()
    inet = [line for line in lines if " connect(" in line and "AF_INET" in line]
    assert inet, "no connection traced at all"
    port = env.provider.url.rsplit(":", 1)[1]
    for line in inet:
        assert re.findall(r"htons\((\d+)\)", line) == [port] and "127.0.0.1" in line, line


# -- fast: prepare ----------------------------------------------------------------------------


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


def test_prepare_builds_env_from_nothing_and_a_turn_file_without_secrets(tmp_path: Path) -> None:
    vault = McpServerSpec("vault", "http://gateway.invalid/gateway/mcp/vault", "uhpgw_turn_token")
    spec = fast_spec(
        tmp_path,
        disabled_tools=("task",),
        system_prompt="Be brief 5521.",
        mcp_servers=(vault,),
        max_output_tokens=300,
    )
    invocation = OpenHandsBase().prepare(spec)
    assert invocation.argv == installer.command("/opt/uhp-tools")
    assert invocation.argv[:2] == ["/opt/uhp-tools/openhands/1.16.0/python/bin/python3", "-s"]
    assert invocation.cwd == "/workspace"
    assert invocation.env["UHP_GATEWAY_TOKEN"] == "uhpgw_turn_token"
    assert invocation.env["UHP_MCP_TOKEN_0"] == "uhpgw_turn_token"
    assert invocation.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert not {"OPENAI_API_KEY", "OPENAI_BASE_URL", "LLM_API_KEY"} & set(invocation.env)
    folder = tmp_path / "home" / oh_config.OPENHANDS_DIR
    text = (folder / oh_config.TURN_FILE).read_text()
    assert "uhpgw_turn_token" not in text
    written = json.loads(text)
    assert written["base_url"] == "http://gateway.invalid/gateway/openai/v1"
    assert written["model"] == MODEL and written["token_env"] == "UHP_GATEWAY_TOKEN"
    assert written["disabled_tools"] == ["task"] and written["max_output_tokens"] == 300
    assert written["instructions"] == "Be brief 5521.\n\nDo not use these tools: task."
    assert written["mcp_servers"] == [
        {
            "name": "vault",
            "url": "http://gateway.invalid/gateway/mcp/vault",
            "transport": "http",
            "token_env": "UHP_MCP_TOKEN_0",
        }
    ]
    assert invocation.env["UHP_OPENHANDS_TURN"] == f"/home/agent/.openhands/{oh_config.TURN_FILE}"
    assert OpenHandsBase().acp_mcp_servers(spec) == []  # in the turn file instead


def test_the_launcher_filters_exactly_the_disabled_tools() -> None:
    from harness_bases.openhands.acp_launcher import tools_filter

    pattern = re.compile(tools_filter(["terminal", "a.b"]) or "")
    offered = ["terminal", "terminal_x", "file_editor", "a.b", "axb", "task"]
    assert [name for name in offered if pattern.match(name)] == [
        "terminal_x",
        "file_editor",
        "axb",
        "task",
    ]
    assert tools_filter([]) is None
