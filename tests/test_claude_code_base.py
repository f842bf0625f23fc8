"""ClaudeCodeBase against the real pinned Claude Code CLI and the scripted provider (no
sandbox), plus fast checks of prepare() and of the driver on replayed real output.

The CLI comes from the `claude_installed` fixture below (ClaudeCodeBase.install into the
tools cache, once per machine). Set UHP_CAPTURE_CLAUDE_CODE_FIXTURES=1 to rewrite
the parser fixtures in harness_bases/claude_code/fixtures/ from these live runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import (
    SYSTEM_PATH,
    McpServerSpec,
    PluginPackage,
    SkillBundle,
    SkillFile,
    StdioServer,
    StdioServerSpec,
    TurnSpec,
)
from harness_bases.claude_code import ClaudeCodeBase
from harness_bases.claude_code import install as installer
from harness_bases.claude_code.failures import provider_message
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.plugin_folders import (
    LAUNCHER_ARGS,
    PYTHON,
    place_plugins,
    plugin_data,
    plugin_root,
    stdio_launches,
)
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.direct_turn import OUTCOMES, DirectTurn
from tests.support.installs import install_commands
from tests.support.live_base import LiveBase, capturing
from tests.support.mcp_server import (
    assert_vault_answered,
    vault_turn,
)
from tests.support.plugins import STDIO_SERVER
from tests.support.stdio_mcp_server import ANSWER_PREFIX as STAMP_PREFIX

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "claude_code" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_CLAUDE_CODE_FIXTURES") else None
MODEL = "claude-test"


@pytest.fixture(scope="session")
def claude_installed() -> Path:
    """The pinned Claude Code CLI, installed once (CI installs it before the tests run)."""
    return installed_tools("claude-code")


def cli_result(turn: DirectTurn) -> dict:
    """The CLI's own `result` message of the turn."""
    (result,) = [m for m in turn.proc.messages() if m.get("type") == "result"]
    return result


@pytest.fixture
def env(claude_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(
        ClaudeCodeBase(),
        provider,
        claude_installed,
        tmp_path,
        timeout=90,
        model=MODEL,
        gateway_url=provider.url,
        fixtures=CAPTURE,
    )


def message_bodies(provider: RunningProvider) -> list[dict]:
    return [r["body"] for r in provider.requests() if r["path"] == "/v1/messages"]


def offered_tools(body: dict) -> list[str]:
    return [tool["name"] for tool in body.get("tools") or []]


# -- live: the real CLI -----------------------------------------------------------------------


@pytest.mark.slow
def test_installed_version_and_install_is_idempotent(
    claude_installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ClaudeCodeBase()
    assert base.installed_version(claude_installed) == "2.1.328"
    assert install_commands(base, claude_installed, monkeypatch) == []  # already there: no npm run
    assert base.installed_version(claude_installed.parent / "nowhere") is None
    prefix = Path(installer.shell_prefix_path(str(claude_installed)))
    assert prefix.read_text() == installer.SHELL_PREFIX and os.access(prefix, os.X_OK)


@pytest.mark.slow
@pytest.mark.parametrize("asks", [False, True])
def test_every_flag_is_one_the_pinned_cli_knows(env: LiveBase, asks: bool) -> None:
    spec = env.spec("x", system_prompt="p", max_step=3, ask_user=answer_blue if asks else None)
    invocation = env.base.prepare(spec)
    help_text = subprocess.run(
        [invocation.argv[0], "--help"], env=invocation.env, capture_output=True, text=True
    ).stdout
    # Flags the help leaves out (or only names in another's text), yet the CLI honours: the
    # live tests below prove each (test_step_budget_is_the_clis_own_limit,
    # test_system_prompt_reaches_the_model_..., test_ask_user_question_asks_through_...).
    hidden = {"--max-turns", "--append-system-prompt-file", "--permission-prompt-tool"}
    for arg in invocation.argv[1:]:
        flag = arg.split("=", 1)[0]
        if flag not in hidden:
            assert re.search(rf"(^|[ ,]){re.escape(flag)}\b", help_text, re.M), flag
    assert ("--permission-prompt-tool=stdio" in invocation.argv) == asks


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
    assert request["path"] == "/v1/messages"
    # Exactly one credential, the turn's token, as a bearer token.
    assert request["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert "x-api-key" not in request["headers"]
    assert request["body"]["model"] == MODEL
    assert request["body"]["stream"] is True


@pytest.mark.slow
async def test_tool_call(env: LiveBase) -> None:
    turn = await env.run("RUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert started.name == "Bash"
    assert json.loads(started.arguments)["command"] == "echo hi"
    assert finished == ev.ToolCallFinished(started.call, "hi", True)
    assert turn.text == "got hi"
    kinds = [type(e) for e in turn.events]
    assert kinds.index(ev.ToolCallStarted) < kinds.index(ev.ToolCallFinished)
    assert kinds.index(ev.ToolCallFinished) < kinds.index(ev.TextDone)
    assert isinstance(turn.events[-1], ev.TurnFinished)


ASKED_COLOUR = {
    "questions": [
        {
            "question": "Which colour?",
            "header": "Colour",
            "multiSelect": False,
            "options": [
                {"label": "red", "description": "warm"},
                {"label": "blue", "description": "cool"},
            ],
        }
    ]
}


async def answer_blue(text: str, options: tuple[str, ...]) -> str | None:
    return "blue"


@pytest.mark.slow
async def test_ask_user_question_asks_through_the_turns_asker(env: LiveBase) -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    async def ask(text: str, options: tuple[str, ...]) -> str | None:
        asked.append((text, options))
        return "blue"

    prompt = f"TOOL AskUserQuestion {json.dumps(ASKED_COLOUR)}\nSAY answer was {{output}}"
    turn = await env.run(prompt, ask_user=ask)
    assert asked == [("Which colour?", ("red", "blue"))]
    assert '"Which colour?"="blue"' in turn.text
    assert isinstance(turn.events[-1], ev.TurnFinished)
    # Without an asker (a plain task) the CLI's headless behaviour is unchanged: no tool.
    env.provider.reset()
    turn = await env.run(prompt)
    assert "AskUserQuestion is disabled" in turn.text


@pytest.mark.slow
async def test_failed_command_is_not_ok(env: LiveBase) -> None:
    turn = await env.run("RUN exit 3\nSAY done")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_thinking_streams_as_reasoning(env: LiveBase) -> None:
    turn = await env.run("THINK plan the work carefully\nSAY x", capture="thinking")
    deltas = turn.of(ev.ReasoningDelta)
    (done,) = turn.of(ev.ReasoningDone)
    assert len(deltas) > 1 and "".join(d.delta for d in deltas) == done.text
    assert done.text == "plan the work carefully"
    kinds = [type(e) for e in turn.events]
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
    # The usage of the resumed turn is its own, not the conversation's running total.
    assert second.of(ev.Usage)[-1].input_tokens < 2 * first.of(ev.Usage)[-1].input_tokens


@pytest.mark.slow
async def test_resume_of_lost_transcript_starts_fresh_and_says_so(env: LiveBase) -> None:
    first = await env.run("REMEMBER pear")
    shutil.rmtree(env.home / ".claude" / "projects")
    turn = await env.run("RECALL", native_session_id=first.native_id)
    assert turn.events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert turn.native_id != first.native_id
    assert turn.text == "nothing to recall"
    assert isinstance(turn.events[-1], ev.TurnFinished)
    unknown = await env.run("SAY fresh", native_session_id="01a22b3c-0000-4000-8000-000000000000")
    assert unknown.events[0] == ev.Notice(RESUME_FAILED_NOTICE) and unknown.text == "fresh"


@pytest.mark.slow
async def test_provider_failure(env: LiveBase) -> None:
    turn = await env.run("FAIL 400 bad", capture="provider_failure")
    assert turn.events[-1] == ev.TurnFailed("bad", "provider_error")
    assert not turn.of(ev.TextDone)  # the CLI's "API Error: ..." note is not an answer


@pytest.mark.slow
async def test_server_error_is_retried_briefly_and_names_no_host(env: LiveBase) -> None:
    started = time.monotonic()
    turn = await env.run("FAIL 500 upstream exploded")
    assert turn.events[-1] == ev.TurnFailed("upstream exploded", "provider_error")
    assert "127.0.0.1" in cli_result(turn)["result"]  # what the CLI says; clients never see it
    assert len(message_bodies(env.provider)) == 3  # two retries, not ten
    assert time.monotonic() - started < 30


@pytest.mark.slow
async def test_interrupt_stops_slow_text_and_the_session_resumes(env: LiveBase) -> None:
    turn = await env.run(
        "SLOW 10\nSAY " + "word " * 40,
        interrupt_when=lambda t: t.first_text_at is not None,
        capture="interrupted",
    )
    assert turn.interrupted_at is not None
    result = cli_result(turn)
    assert result["subtype"] == "error_during_execution"
    stamp = next(s for s, line in turn.proc.stdout if b'"type":"result"' in line)
    assert stamp - turn.interrupted_at < 3
    # Interrupted: no outcome event (the engine asked for it and knows), the partial text
    # is kept, and the CLI exited.
    assert not [e for e in turn.events if isinstance(e, OUTCOMES)]
    assert turn.text.startswith("word")
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
async def test_step_budget_is_the_clis_own_limit(env: LiveBase) -> None:
    # max_step 2: two tool-call rounds and the answer after them; a third round is where
    # the CLI itself stops (the engine, counting, stops the turn before it).
    turn = await env.run("LOOP", max_step=2, capture="max_turns")
    assert len(turn.of(ev.ToolCallStarted)) == 3
    assert isinstance(turn.events[-1], ev.StepBudgetReached)
    assert cli_result(turn)["subtype"] == "error_max_turns"
    within = await env.run("RUN echo a\nRUN echo b\nSAY two steps", max_step=2)
    assert within.text == "two steps" and isinstance(within.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_tool_commands_do_not_inherit_credentials(env: LiveBase) -> None:
    turn = await env.run(
        "RUN env\nSAY {output}", mcp_servers=(_mcp_spec("http://127.0.0.1:9/mcp"),)
    )
    (finished,) = turn.of(ev.ToolCallFinished)
    assert "HOME=" in finished.output
    for leaked in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "UHP_", PROVIDER_KEY, "mcp-tok"):
        assert leaked not in finished.output


@pytest.mark.slow
async def test_disabled_tool_is_blocked_hard_and_back_when_enabled(env: LiveBase) -> None:
    call_bash = 'TOOL Bash {"command": "echo ran"}\nSAY {output}'
    enabled = await env.run(call_bash)
    assert enabled.of(ev.ToolCallFinished)[0] == ev.ToolCallFinished(
        enabled.of(ev.ToolCallStarted)[0].call, "ran", True
    )
    env.provider.reset()
    blocked = await env.run(
        call_bash, native_session_id=enabled.native_id, disabled_tools=("Bash",), capture="denied"
    )
    (started,) = blocked.of(ev.ToolCallStarted)
    (finished,) = blocked.of(ev.ToolCallFinished)
    assert started.name == "Bash"  # the scripted model really called it
    assert not finished.ok and "Bash" in finished.output and "ran" not in finished.output
    assert blocked.text == finished.output  # the task says so
    assert all("Bash" not in offered_tools(body) for body in message_bodies(env.provider))
    settings = json.loads((env.home / ".claude" / "settings.json").read_text())
    assert settings["permissions"]["deny"] == ["Bash"]
    env.provider.reset()
    again = await env.run(call_bash, native_session_id=enabled.native_id)
    assert again.of(ev.ToolCallFinished)[0].output == "ran"
    assert "Bash" in offered_tools(message_bodies(env.provider)[0])
    assert json.loads((env.home / ".claude" / "settings.json").read_text())["permissions"] == {
        "deny": []
    }


@pytest.mark.slow
async def test_system_prompt_reaches_the_model_and_follows_each_turn(env: LiveBase) -> None:
    first = await env.run("SAY one", system_prompt="Always answer like a pirate 7731.")
    await env.run("SAY two", system_prompt="Beta rule 8842.", native_session_id=first.native_id)
    await env.run("SAY three", native_session_id=first.native_id)
    systems = [json.dumps(body["system"]) for body in message_bodies(env.provider)]
    assert "pirate 7731" in systems[0]
    assert "Beta rule 8842" in systems[1] and "pirate 7731" not in systems[1]
    assert "Beta rule" not in systems[2] and "pirate" not in systems[2]
    assert not (env.workspace / "CLAUDE.md").exists() and not (env.workspace / "AGENTS.md").exists()


@pytest.mark.slow
async def test_long_prompt_over_stdin(env: LiveBase) -> None:
    filler = "x" * (200 * 1024)
    turn = await env.run(f"SAY long ok\n{filler}")
    assert turn.text == "long ok"
    assert filler in json.dumps(message_bodies(env.provider)[0])


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
    turn = await env.run('TOOL Skill {"skill": "uhp-zebra"}\nSAY {output}', skills=(skill,))
    init = next(m for m in turn.proc.messages() if m.get("subtype") == "init")
    assert "uhp-zebra" in init["skills"]
    assert "Knows the zebra-42 word." in json.dumps(message_bodies(env.provider)[0])
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok
    assert "zebra-42" in json.dumps(message_bodies(env.provider)[-1])  # SKILL.md was loaded
    folder = env.home / ".claude" / "skills" / "uhp-zebra"
    assert (folder / "notes" / "more.txt").read_bytes() == b"more zebra\n"
    await env.run("SAY gone", native_session_id=turn.native_id)  # the skill is disabled
    assert not folder.exists()


DEMO_SKILL = b"---\nname: demo-skill\ndescription: Knows the okapi word.\n---\nokapi-7\n"


def demo_plugin(skill_body: bytes = DEMO_SKILL) -> PluginPackage:
    """A plugin with a skill and the stamp stdio server (tests/support/stdio_mcp_server.py)."""
    files = (
        SkillFile("plugin.json", b"{}"),
        SkillFile("bin/stamp", STDIO_SERVER.encode(), executable=True),
        SkillFile("skills/demo-skill/SKILL.md", skill_body),
    )
    stamp = StdioServer("stamp", "./bin/stamp", args=("--data", "${PLUGIN_DATA}/x"))
    return PluginPackage("demo-plugin", files, (stamp,), "1.0.0", "A demo plugin.")


def demo_skills(plugin: PluginPackage) -> tuple[SkillBundle, ...]:
    """The plugin's skill (as the engine derives it) beside one of the harness's own."""
    skill = SkillFile("SKILL.md", next(f.data for f in plugin.files if f.path.endswith("SKILL.md")))
    own = SkillFile("SKILL.md", b"---\nname: own-skill\ndescription: The harness's own.\n---\n")
    return (
        SkillBundle("own-skill", (own,)),
        SkillBundle("demo-skill", (skill, SkillFile("run.sh", b"#!/bin/sh\n")), plugin.name),
    )


@pytest.mark.slow
async def test_a_plugin_loads_natively_with_its_skill_and_its_stdio_server(env: LiveBase) -> None:
    skill_md = (
        b"---\nname: demo-skill\ndescription: Knows the okapi word.\n---\n"
        b"The plugin word is okapi-7. [${ANTHROPIC_AUTH_TOKEN}]\n"
        b"!`echo ran-$ANTHROPIC_AUTH_TOKEN`\n"
    )
    plugin = demo_plugin(skill_md)
    paths = env.spec("x").paths
    fields: dict = {
        "plugins": (plugin,),
        "skills": demo_skills(plugin),
        "stdio_servers": stdio_launches((plugin,), paths),
    }
    place_plugins(env.spec("x", **fields))  # what the engine does before prepare()
    prompt = (
        'TOOL Skill {"skill": "demo-skill"}\nTOOL mcp__stamp__stamp {"word": "w"}\nSAY {outputs}'
    )
    turn = await env.run(prompt, **fields)
    init = next(m for m in turn.proc.messages() if m.get("subtype") == "init")
    native = env.home / ".claude" / "uhp" / "plugins" / "demo-plugin"
    loaded = [p for p in init["plugins"] if p["name"] == "demo-plugin"]
    assert loaded == [
        {
            "name": "demo-plugin",
            "path": str(native),
            "source": "demo-plugin@inline",
            "version": "1.0.0",
        }
    ]
    assert "demo-plugin:demo-skill" in init["skills"] and "own-skill" in init["skills"]
    assert "demo-skill" not in init["skills"]  # listed once, as the plugin's
    # The plugin's server is the harness's namespace: its own name, connected, not renamed.
    assert {"name": "stamp", "status": "connected"}.items() <= init["mcp_servers"][0].items()
    assert "mcp__stamp__stamp" in init["tools"]
    finished = turn.of(ev.ToolCallFinished)
    assert [f.ok for f in finished] == [True, True]
    # The skill was loaded by its own name, from the native plugin, with nothing expanded
    # from the CLI's environment and its command run without the turn's credentials.
    told = json.dumps(message_bodies(env.provider)[-1])
    assert f"Base directory for this skill: {native}/skills/demo-skill" in told
    assert "okapi-7. [${ANTHROPIC_AUTH_TOKEN}]" in told and "ran-\\n" in told
    assert PROVIDER_KEY not in told
    # The stdio server ran through the launcher: the plugin's process, not the CLI's.
    stamped = next(f.output for f in finished if STAMP_PREFIX in f.output)
    facts = json.loads(stamped[stamped.index("{") : stamped.rindex("}") + 1])
    root, data = plugin_root(paths.home, "demo-plugin"), plugin_data(paths.home, "demo-plugin")
    assert (facts["root"], facts["data"], facts["cwd"]) == (root, data, root)
    assert facts["argv"] == ["--data", f"{data}/x"]
    assert not [n for n in facts["env"] if n.startswith(("ANTHROPIC", "UHP_", "CLAUDE"))]


def _mcp_spec(url: str, token: str = "mcp-tok-1") -> McpServerSpec:
    return McpServerSpec(name="vault", url=url, bearer_token=token)


@pytest.mark.slow
async def test_mcp_server_is_reached_with_its_bearer_token(env: LiveBase) -> None:
    turn, server = await vault_turn(env, "mcp__vault__lookup")
    assert_vault_answered(turn, server)
    assert "mcp-tok-1" not in (env.home / ".claude" / "uhp" / "mcp.json").read_text()
    assert not turn.of(ev.Notice)


@pytest.mark.slow
async def test_an_unreachable_mcp_server_is_reported_not_fatal(env: LiveBase) -> None:
    turn = await env.run(
        "SAY still fine", mcp_servers=(_mcp_spec("http://127.0.0.1:9/mcp"),), capture="mcp_failed"
    )
    assert ev.Notice("The MCP server vault could not be started.") in turn.events
    assert turn.text == "still fine"


@pytest.mark.slow
async def test_the_cli_connects_to_nothing_but_the_gateway(env: LiveBase) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("SKIPPED LOUDLY: no strace here, so the CLI's connections cannot be traced")
    trace = env.home.parent / "connect.trace"
    wrap = [strace, "-f", "-qq", "-e", "trace=connect", "-o", str(trace)]
    # With a plugin loaded in the CLI's own form and its stdio server started: neither
    # reaches for anything either.
    plugin = demo_plugin()
    fields: dict = {
        "plugins": (plugin,),
        "skills": demo_skills(plugin),
        "stdio_servers": stdio_launches((plugin,), env.spec("x").paths),
    }
    place_plugins(env.spec("x", **fields))
    turn = await env.run("RUN echo hi\nSAY {output}", wrap=wrap, **fields)
    first = json.dumps(message_bodies(env.provider)[0])
    assert "demo-plugin:demo-skill" in first and "mcp__stamp__stamp" in first
    assert turn.text == "hi"
    port = env.provider.url.rsplit(":", 1)[1]
    inet = [line for line in trace.read_text().splitlines() if "AF_INET" in line]
    assert inet, "no connection traced at all"
    for line in inet:
        assert f"htons({port})" in line and "127.0.0.1" in line, line


# -- fast: prepare, and the driver against replayed real output (no CLI) ----------------------


def fast_spec(tmp_path: Path, **kw: object) -> TurnSpec:
    fields: dict = {
        "prompt": "SAY hi",
        "model": MODEL,
        "gateway_url": "http://gateway.invalid/gateway/anthropic",
        "gateway_token": "uhpgw_turn_token",
        "host_workspace": tmp_path / "ws",
        "host_home": tmp_path / "home",
        "host_tools": tmp_path / "tools",
    }
    return TurnSpec(**{**fields, **kw})


def test_prepare_builds_env_from_nothing_and_the_exact_command(tmp_path: Path) -> None:
    invocation = ClaudeCodeBase().prepare(fast_spec(tmp_path))
    assert invocation.cwd == "/workspace"
    assert invocation.env == {
        "PATH": SYSTEM_PATH,
        "HOME": "/home/agent",
        "CLAUDE_CONFIG_DIR": "/home/agent/.claude",
        "ANTHROPIC_BASE_URL": "http://gateway.invalid/gateway/anthropic",
        "ANTHROPIC_AUTH_TOKEN": "uhpgw_turn_token",
        "CLAUDE_CODE_SHELL_PREFIX": "/opt/uhp-tools/claude-code/2.1.328/uhp-shell-prefix",
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_RETRIES": "2",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    assert invocation.argv == [
        installer.binary_path("/opt/uhp-tools"),
        "--print",
        "--input-format=stream-json",
        "--output-format=stream-json",
        "--verbose",
        "--include-partial-messages",
        "--dangerously-skip-permissions",
        "--permission-prompts=none",
        "--model=claude-test",
        "--system-prompt-snapshot=off",
        "--mcp-config=/home/agent/.claude/uhp/mcp.json",
        "--strict-mcp-config",
    ]
    home = tmp_path / "home" / ".claude"
    assert json.loads((home / "settings.json").read_text()) == {
        "permissions": {"deny": []},
        "cleanupPeriodDays": 36500,
    }
    assert json.loads((home / "uhp" / "mcp.json").read_text()) == {"mcpServers": {}}
    assert not (home / "uhp" / "system-prompt.md").exists()


LAUNCHER = "/home/agent/.uhp-plugins/launcher.py"
LAUNCH = "/home/agent/.uhp-plugins/demo/stamp.json"


def test_prepare_writes_budget_prompt_mcp_and_deny_rules(tmp_path: Path) -> None:
    spec = fast_spec(
        tmp_path,
        system_prompt="Be brief.",
        max_step=4,
        disabled_tools=("WebSearch", "Bash", "WebSearch"),
        mcp_servers=(
            McpServerSpec("vault", "http://gw/mcp/vault", "tok-a"),
            McpServerSpec("docs", "http://gw/mcp/docs", "tok-b", "sse"),
        ),
        stdio_servers=(StdioServerSpec("stamp", "python3", ("-I", LAUNCHER, LAUNCH), "demo"),),
    )
    invocation = ClaudeCodeBase().prepare(spec)
    assert invocation.argv[-2:] == [
        "--append-system-prompt-file=/home/agent/.claude/uhp/system-prompt.md",
        "--max-turns=5",
    ]
    assert invocation.env["UHP_MCP_TOKEN_0"] == "tok-a"
    assert invocation.env["UHP_MCP_TOKEN_1"] == "tok-b"
    home = tmp_path / "home" / ".claude"
    assert (home / "uhp" / "system-prompt.md").read_text() == "Be brief."
    assert json.loads((home / "settings.json").read_text())["permissions"] == {
        "deny": ["WebSearch", "Bash"]
    }
    mcp = json.loads((home / "uhp" / "mcp.json").read_text())
    assert mcp == {
        "mcpServers": {
            "vault": {
                "type": "http",
                "url": "http://gw/mcp/vault",
                "headers": {"Authorization": "Bearer ${UHP_MCP_TOKEN_0}"},
            },
            "docs": {
                "type": "sse",
                "url": "http://gw/mcp/docs",
                "headers": {"Authorization": "Bearer ${UHP_MCP_TOKEN_1}"},
            },
            # A plugin's stdio server: the CLI starts its launcher, never the plugin's string.
            "stamp": {"type": "stdio", "command": "python3", "args": ["-I", LAUNCHER, LAUNCH]},
        }
    }
    # The next turn rewrites everything: nothing is left of this one.
    ClaudeCodeBase().prepare(fast_spec(tmp_path))
    assert json.loads((home / "settings.json").read_text())["permissions"] == {"deny": []}
    assert not (home / "uhp" / "system-prompt.md").exists()
    assert json.loads((home / "uhp" / "mcp.json").read_text()) == {"mcpServers": {}}


def test_links_the_agent_left_in_its_home_are_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    home = tmp_path / "home" / ".claude"
    (home / "skills").mkdir(parents=True)
    (home / "settings.json").symlink_to(outside / "keep.txt")
    (home / "uhp").symlink_to(outside)
    (home / "skills" / "s").symlink_to(outside)
    skill = SkillBundle("s", (SkillFile("SKILL.md", b"---\nname: s\n---\n"),))
    ClaudeCodeBase().prepare(fast_spec(tmp_path, system_prompt="x", skills=(skill,)))
    (home / "uhp" / "plugins").symlink_to(outside)
    ClaudeCodeBase().prepare(fast_spec(tmp_path, skills=(skill,), plugins=(demo_plugin(),)))
    assert (outside / "keep.txt").read_text() == "host file"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert not (home / "settings.json").is_symlink() and not (home / "uhp").is_symlink()
    assert (home / "skills" / "s" / "SKILL.md").read_bytes() == b"---\nname: s\n---\n"
    plugins = home / "uhp" / "plugins"
    assert not plugins.is_symlink() and (plugins / "demo-plugin" / ".claude-plugin").is_dir()


def test_skills_written_whole_and_removed_when_gone(tmp_path: Path) -> None:
    skills = tmp_path / "home" / ".claude" / "skills"
    first = (
        SkillBundle("a", (SkillFile("SKILL.md", b"A"), SkillFile("bin/run.sh", b"#!/bin/sh\n"))),
        SkillBundle("b", (SkillFile("SKILL.md", b"B"),)),
    )
    ClaudeCodeBase().prepare(fast_spec(tmp_path, skills=first))
    assert (skills / "a" / "SKILL.md").read_bytes() == b"A"
    assert os.access(skills / "a" / "bin" / "run.sh", os.X_OK)
    (skills / "mine").mkdir()  # a skill the agent made itself
    (skills / "mine" / "SKILL.md").write_text("mine")
    (skills / "a" / "stale.txt").write_text("left by the agent")
    ClaudeCodeBase().prepare(fast_spec(tmp_path, skills=(SkillBundle("a", first[0].files),)))
    assert sorted(p.name for p in skills.iterdir()) == ["a", "mine"]
    assert not (skills / "a" / "stale.txt").exists()


def test_plugins_are_claude_code_plugins_and_their_servers_start_through_the_launcher(
    tmp_path: Path,
) -> None:
    plugin = demo_plugin()
    paths = fast_spec(tmp_path).paths
    spec = fast_spec(
        tmp_path,
        plugins=(plugin,),
        skills=demo_skills(plugin),
        stdio_servers=stdio_launches((plugin,), paths),
        system_prompt="x",
    )
    argv = ClaudeCodeBase().prepare(spec).argv
    assert argv[-2:] == [
        "--plugin-dir=/home/agent/.claude/uhp/plugins",
        "--append-system-prompt-file=/home/agent/.claude/uhp/system-prompt.md",
    ]
    assert "--strict-mcp-config" in argv  # no server but the MCP config's
    config = tmp_path / "home" / ".claude"
    native = config / "uhp" / "plugins" / "demo-plugin"
    assert json.loads((native / ".claude-plugin" / "plugin.json").read_text()) == {
        "name": "demo-plugin",
        "version": "1.0.0",
        "description": "A demo plugin.",
    }
    # Only the manifest and the plugin's skills: never the package's own files.
    written = sorted(str(p.relative_to(native)) for p in native.rglob("*") if p.is_file())
    assert written == [
        ".claude-plugin/plugin.json",
        "skills/demo-skill/SKILL.md",
        "skills/demo-skill/run.sh",
    ]
    assert os.access(native / "skills" / "demo-skill" / "run.sh", os.X_OK)
    # The harness's own skill where personal skills go; the plugin's only in its plugin.
    assert sorted(p.name for p in (config / "skills").iterdir()) == ["own-skill"]
    mcp = json.loads((config / "uhp" / "mcp.json").read_text())
    assert mcp["mcpServers"] == {
        "stamp": {
            "type": "stdio",
            "command": PYTHON,
            "args": [*LAUNCHER_ARGS, "/home/agent/.uhp/plugin-servers/stamp.json"],
        }
    }
    # The next turn, the plugin disabled: nothing of it is loaded, nor what the agent left.
    (config / "uhp" / "plugins" / "planted" / ".claude-plugin").mkdir(parents=True)
    argv = ClaudeCodeBase().prepare(fast_spec(tmp_path)).argv
    assert not any(a.startswith("--plugin-dir") for a in argv)
    assert not (config / "uhp" / "plugins").exists()
    assert json.loads((config / "uhp" / "mcp.json").read_text()) == {"mcpServers": {}}


def test_resume_only_when_the_transcript_is_there(tmp_path: Path) -> None:
    session = "5f0c8a4e-1111-4222-8333-944445555666"
    argv = ClaudeCodeBase().prepare(fast_spec(tmp_path, native_session_id=session)).argv
    assert not any(a.startswith("--resume") for a in argv)
    project = tmp_path / "home" / ".claude" / "projects" / "-workspace"
    project.mkdir(parents=True)
    (project / f"{session}.jsonl").write_text('{"type":"user"}\n')
    argv = ClaudeCodeBase().prepare(fast_spec(tmp_path, native_session_id=session)).argv
    assert argv[-1] == f"--resume={session}"
    argv = ClaudeCodeBase().prepare(fast_spec(tmp_path, native_session_id="../../etc")).argv
    assert not any(a.startswith("--resume") for a in argv)


def test_provider_messages_never_name_a_host_or_path() -> None:
    assert provider_message("API Error: 400 bad", 400) == "bad"
    assert provider_message("API Error: Request rejected (429) · slow down", 429) == "slow down"
    server_error = (
        "API Error: 500 boom. This is a server-side issue, usually temporary — try again in a "
        "moment. If it persists, check your inference gateway (127.0.0.1:18555)."
    )
    assert provider_message(server_error, 500) == "boom"
    for revealing in ("API Error: 404 no route /v1/x", "API Error: 502 cannot reach api.x.io:443"):
        assert provider_message(revealing, 502) == (
            "The model provider refused the request (HTTP 502)."
        )
    assert provider_message("", None) == "The model provider refused the request."


class ReplayProcess:
    """Plays captured stdout back once the prompt was written; stdout ends when stdin is
    closed (as the CLI does in stream-json mode)."""

    def __init__(self, lines: list[str], pause_after: Callable[[dict], bool] | None = None):
        self._lines = lines
        self.written: list[dict] = []
        self._wrote = asyncio.Event()
        self._stdin_closed = asyncio.Event()
        self._pause_after = pause_after

    async def write(self, data: bytes) -> None:
        if self._stdin_closed.is_set():
            raise BrokenPipeError("stdin closed")
        self.written += [json.loads(line) for line in data.splitlines()]
        self._wrote.set()

    async def close_stdin(self) -> None:
        self._stdin_closed.set()

    async def lines(self) -> AsyncIterator[bytes]:
        while not self.written:
            self._wrote.clear()
            await self._wrote.wait()
        for line in self._lines:
            count = len(self.written)
            yield line.encode()
            if self._pause_after and self._pause_after(json.loads(line)):
                while len(self.written) == count:  # until the driver writes again
                    self._wrote.clear()
                    await self._wrote.wait()
        await self._stdin_closed.wait()

    def stderr_tail(self) -> str:
        return ""


def fixture_lines(name: str) -> list[str]:
    return (FIXTURES / f"{name}.jsonl").read_text().splitlines()


async def drive_all(proc: ReplayProcess, spec: TurnSpec, base: ClaudeCodeBase | None = None):
    events = []
    async with asyncio.timeout(10):
        async for event in (base or ClaudeCodeBase()).start_turn(proc, spec).events():
            events.append(event)
    return events


async def test_driver_sends_the_prompt_as_a_stream_json_user_message(tmp_path: Path) -> None:
    proc = ReplayProcess(fixture_lines("tool_call"))
    events = await drive_all(proc, fast_spec(tmp_path, prompt="SAY hi \ud800"))
    assert proc.written == [
        {"type": "user", "message": {"role": "user", "content": "SAY hi ?"}},
    ]
    assert isinstance(events[0], ev.NativeSession)
    assert isinstance(events[-1], ev.TurnFinished)
    assert proc._stdin_closed.is_set()  # closed after the result, so the CLI can exit


async def test_driver_denies_the_clis_own_questions(tmp_path: Path) -> None:
    lines = fixture_lines("text")
    ask = {
        "type": "control_request",
        "request_id": "q1",
        "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}},
    }
    other = {"type": "control_request", "request_id": "q2", "request": {"subtype": "elicit"}}
    lines[1:1] = [json.dumps(ask), json.dumps(other)]
    proc = ReplayProcess(lines)
    events = await drive_all(proc, fast_spec(tmp_path))
    first, second = proc.written[1:3]
    assert first["response"]["request_id"] == "q1"
    assert first["response"]["response"]["behavior"] == "deny"
    assert second["response"] == {
        "subtype": "error",
        "request_id": "q2",
        "error": "No user is available to answer; continue without it.",
    }
    assert isinstance(events[-1], ev.TurnFinished)


async def test_driver_answers_ask_user_question_with_the_users_answers(tmp_path: Path) -> None:
    lines = fixture_lines("text")
    request = {"subtype": "can_use_tool", "tool_name": "AskUserQuestion", "input": ASKED_COLOUR}
    lines[1:1] = [json.dumps({"type": "control_request", "request_id": "q7", "request": request})]
    # Like the CLI, the replay waits for the answer before it goes on.
    proc = ReplayProcess(lines, pause_after=lambda m: m.get("type") == "control_request")
    events = await drive_all(proc, fast_spec(tmp_path, ask_user=answer_blue))
    (reply,) = [m for m in proc.written if m.get("type") == "control_response"]
    assert reply["response"]["request_id"] == "q7"
    allowed = reply["response"]["response"]
    assert allowed == {
        "behavior": "allow",
        "updatedInput": {**ASKED_COLOUR, "answers": {"Which colour?": "blue"}},
    }
    assert isinstance(events[-1], ev.TurnFinished)


async def test_interrupt_sends_a_control_request(tmp_path: Path) -> None:
    base = ClaudeCodeBase()
    proc = ReplayProcess(
        fixture_lines("interrupted"),
        pause_after=lambda m: (m.get("event") or {}).get("type") == "content_block_delta",
    )
    agent_turn = base.start_turn(proc, fast_spec(tmp_path))
    events = []
    async with asyncio.timeout(10):
        async for event in agent_turn.events():
            events.append(event)
            if isinstance(event, ev.TextDelta) and len(proc.written) == 1:
                assert await agent_turn.interrupt()
    interrupt = proc.written[1]
    assert interrupt["type"] == "control_request"
    assert interrupt["request"] == {"subtype": "interrupt"}
    assert not [e for e in events if isinstance(e, OUTCOMES)]
    assert not await agent_turn.interrupt()  # the turn is gone


async def test_stdout_eof_before_the_result(tmp_path: Path) -> None:
    lines = fixture_lines("text")
    proc = ReplayProcess(lines[:5])
    proc._stdin_closed.set()  # stdout ends right after the replayed lines
    events = await drive_all(proc, fast_spec(tmp_path))
    assert events[-1] == ev.TurnFailed("the agent exited unexpectedly", "harness_error")


async def test_cli_gone_before_the_prompt(tmp_path: Path) -> None:
    proc = ReplayProcess([])
    proc._stdin_closed.set()
    events = await drive_all(proc, fast_spec(tmp_path))
    assert events == [ev.TurnFailed("the agent exited unexpectedly", "harness_error")]


async def test_driver_reports_a_fresh_start_first(tmp_path: Path) -> None:
    spec = fast_spec(tmp_path, native_session_id="5f0c8a4e-1111-4222-8333-944445555666")
    events = await drive_all(ReplayProcess(fixture_lines("text")), spec)
    assert events[0] == ev.Notice(RESUME_FAILED_NOTICE)
    assert isinstance(events[1], ev.NativeSession)


@pytest.mark.slow
async def test_a_plugin_skills_hooks_run_without_the_turns_credentials(env: LiveBase) -> None:
    """A plugin's SKILL.md may declare hooks in its front matter, which Claude Code runs as
    commands while the skill is active. A plugin comes from its author, not the principal:
    a hook is a command like any other and must not see the CLI's credentials (review of
    issue 26)."""
    leak = env.workspace / "hook-env.txt"
    skill_md = (
        b"---\nname: demo-skill\ndescription: Knows the okapi word.\n"
        b"hooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n"
        b"        - type: command\n"
        b"          command: env > " + str(leak).encode() + b"\n"
        b"---\nThe plugin word is okapi-7.\n"
    )
    plugin = demo_plugin(skill_md)
    fields: dict = {
        "plugins": (plugin,),
        "skills": demo_skills(plugin),
        "stdio_servers": stdio_launches((plugin,), env.spec("x").paths),
        "mcp_servers": (_mcp_spec("http://127.0.0.1:9/mcp"),),
    }
    place_plugins(env.spec("x", **fields))
    prompt = 'TOOL Skill {"skill": "demo-skill"}\nTOOL Bash {"command": "echo hi"}\nSAY {outputs}'
    await env.run(prompt, **fields)
    # The pinned CLI runs a skill's hooks: through the shell prefix, like a Bash command.
    seen = leak.read_text()
    assert "CLAUDE_PROJECT_DIR=" in seen
    for secret in ("ANTHROPIC_AUTH_TOKEN", "UHP_", PROVIDER_KEY, "mcp-tok"):
        assert secret not in seen, secret
