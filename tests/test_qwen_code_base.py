"""QwenCodeBase against the real pinned Qwen Code CLI (over ACP) and the scripted provider
(no sandbox), plus fast checks of prepare().

The CLI comes from the `qwen_installed` fixture (QwenCodeBase.install into the tools cache,
once per machine). Set UHP_CAPTURE_QWEN_CODE_FIXTURES=1 to rewrite the parser fixtures in
harness_bases/qwen_code/fixtures/ from these live runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import (
    McpServerSpec,
    PluginPackage,
    SandboxPaths,
    SkillBundle,
    SkillFile,
    StdioServer,
    TurnSpec,
)
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.plugin_folders import LAUNCHER_ARGS, PYTHON, place_plugins, stdio_launches
from harness_bases.qwen_code import QwenCodeBase
from harness_bases.qwen_code import config as qwen_config
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.installs import install_commands
from tests.support.live_base import LiveBase, capturing, chat_bodies, offered_tools, system_text
from tests.support.mcp_server import (
    ANSWER_PREFIX,
    assert_vault_answered,
    vault_turn,
)
from tests.support.plugin_turn import WORD, stamp_plugin, stamp_turn, stamped
from tests.support.plugins import STDIO_SERVER

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "qwen_code" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_QWEN_CODE_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def qwen_installed() -> Path:
    """The pinned Qwen Code and its node, installed once (CI installs them before the tests)."""
    return installed_tools("qwen-code")


@pytest.fixture
def env(qwen_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(
        QwenCodeBase(), provider, qwen_installed, tmp_path, timeout=120, fixtures=CAPTURE
    )


# -- live: the real CLI -----------------------------------------------------------------------


@pytest.mark.slow
def test_installed_version_and_install_is_idempotent(
    qwen_installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = QwenCodeBase()
    assert base.installed_version(qwen_installed) == "0.24.4"
    assert install_commands(base, qwen_installed, monkeypatch) == []  # already there: no npm run
    assert base.installed_version(qwen_installed.parent / "nowhere") is None


@pytest.mark.slow
def test_every_flag_is_one_the_pinned_cli_knows(env: LiveBase) -> None:
    invocation = env.base.prepare(env.spec("x", system_prompt="p"))
    help_text = subprocess.run(
        [*invocation.argv[:2], "--help"], env=invocation.env, capture_output=True, text=True
    ).stdout
    flags = [a for a in invocation.argv[2:] if a.startswith("--")]
    assert "--append-system-prompt" in flags
    for flag in flags:
        assert re.search(rf"^\s+(-\w, )?{re.escape(flag)}\b", help_text, re.M), flag


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
    # One model call: no classifier, next-speaker check or suggestion behind the agent's back.
    (request,) = [r for r in env.provider.requests() if r["path"] == "/v1/chat/completions"]
    assert request["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert request["body"]["model"] == MODEL and request["body"]["stream"] is True


@pytest.mark.slow
async def test_tool_call_with_its_arguments(env: LiveBase) -> None:
    turn = await env.run("THINK plan it\nRUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert started.name == "run_shell_command"
    assert json.loads(started.arguments)["command"] == "echo hi"
    assert finished == ev.ToolCallFinished(started.call, "hi", True)
    assert turn.text == "got hi"
    assert [d.text for d in turn.of(ev.ReasoningDone)] == ["plan it", "plan it"]
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_failed_command_is_not_ok(env: LiveBase) -> None:
    turn = await env.run("RUN exit 3\nSAY done")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_resume_remembers_and_a_lost_session_starts_fresh(env: LiveBase) -> None:
    first = await env.run("REMEMBER apple")
    assert first.text == "noted apple"
    second = await env.run("RECALL", native_session_id=first.native_id, capture="resume")
    assert second.native_id == first.native_id
    assert second.text == "you said apple" and not second.of(ev.Notice)
    lost = await env.run("RECALL", native_session_id="5c1b2a3d-0000-4000-8000-000000000000")
    assert ev.Notice(RESUME_FAILED_NOTICE) in lost.events
    assert lost.text == "nothing to recall"


@pytest.mark.slow
async def test_provider_failure(env: LiveBase) -> None:
    turn = await env.run("FAIL 400 bad request words", capture="provider_failure")
    assert turn.outcome == ev.TurnFailed("bad request words", "provider_error")
    assert not turn.of(ev.TextDone)


@pytest.mark.slow
async def test_a_failed_turn_is_not_sent_again_with_the_next(env: LiveBase) -> None:
    first = await env.run("REMEMBER apple")
    failed = await env.run("FAIL 400 refused words", native_session_id=first.native_id)
    assert failed.outcome == ev.TurnFailed("refused words", "provider_error")
    env.provider.reset()
    again = await env.run("RECALL", native_session_id=first.native_id)
    assert again.native_id == first.native_id and not again.of(ev.Notice)
    assert again.text == "you said apple"  # the turn before the failed one is kept
    assert "refused words" not in json.dumps(chat_bodies(env.provider))


@pytest.mark.slow
async def test_interrupt_stops_slow_text_and_the_session_resumes(env: LiveBase) -> None:
    turn = await env.run(
        "SLOW 10\nSAY " + "word " * 40,
        interrupt_when=lambda t: t.first_text_at is not None,
        capture="interrupted",
    )
    assert turn.interrupted_at is not None
    assert turn.proc.returncode is not None
    assert time.monotonic() - turn.interrupted_at < 15
    assert not [e for e in turn.events if isinstance(e, ev.TurnFinished)]
    again = await env.run("SAY after the cancel", native_session_id=turn.native_id)
    assert again.native_id == turn.native_id and not again.of(ev.Notice)
    assert again.text == "after the cancel"


@pytest.mark.slow
async def test_tool_commands_do_not_inherit_credentials(env: LiveBase) -> None:
    turn = await env.run("RUN env\nSAY {output}")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert "HOME=" in finished.output
    for leaked in ("OPENAI_API_KEY", "UHP_", PROVIDER_KEY):
        assert leaked not in finished.output


@pytest.mark.slow
async def test_disabled_tool_is_blocked_hard_and_back_when_enabled(env: LiveBase) -> None:
    call = 'TOOL run_shell_command {"command": "echo ran"}\nSAY {output}'
    enabled = await env.run(call)
    assert enabled.of(ev.ToolCallFinished)[0].output == "ran"
    env.provider.reset()
    blocked = await env.run(
        call,
        native_session_id=enabled.native_id,
        disabled_tools=("run_shell_command",),
        capture="denied",
    )
    (finished,) = blocked.of(ev.ToolCallFinished)
    assert not finished.ok and "ran" not in finished.output
    assert all("run_shell_command" not in offered_tools(b) for b in chat_bodies(env.provider))
    assert "read_file" in offered_tools(chat_bodies(env.provider)[0])
    env.provider.reset()
    again = await env.run(call, native_session_id=enabled.native_id)
    assert again.of(ev.ToolCallFinished)[0].output == "ran"
    assert "run_shell_command" in offered_tools(chat_bodies(env.provider)[0])


@pytest.mark.slow
async def test_system_prompt_reaches_the_model_and_follows_each_turn(env: LiveBase) -> None:
    first = await env.run("SAY one", system_prompt="Always answer like a pirate 7731.")
    await env.run("SAY two", system_prompt="Beta rule 8842.", native_session_id=first.native_id)
    await env.run("SAY three", native_session_id=first.native_id)
    systems = [system_text(body) for body in chat_bodies(env.provider)]
    assert "pirate 7731" in systems[0]
    assert "Beta rule 8842" in systems[1] and "pirate 7731" not in systems[1]
    assert "Beta rule" not in systems[2] and "pirate" not in systems[2]


@pytest.mark.slow
async def test_skills_are_found_listed_and_loaded(env: LiveBase) -> None:
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
    turn = await env.run('TOOL skill {"skill": "uhp-zebra"}\nSAY {output}', skills=(skill,))
    assert "Knows the zebra-42 word." in json.dumps(chat_bodies(env.provider)[0])
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok and "zebra-42" in json.dumps(chat_bodies(env.provider)[-1])
    folder = env.home / ".qwen" / "skills" / "uhp-zebra"
    assert (folder / "notes" / "more.txt").read_bytes() == b"more zebra\n"
    await env.run("SAY gone", native_session_id=turn.native_id)
    assert not folder.exists()


@pytest.mark.slow
async def test_mcp_tools_are_offered_and_reached_with_the_bearer_token(env: LiveBase) -> None:
    turn, server = await vault_turn(env, "lookup")
    assert any(name.endswith("lookup") for name in offered_tools(chat_bodies(env.provider)[0]))
    assert_vault_answered(turn, server)
    assert ANSWER_PREFIX + "abc" in turn.text
    assert "mcp-tok-1" not in (env.home / ".qwen" / "settings.json").read_text()


@pytest.mark.slow
async def test_a_plugin_s_stdio_server_runs_in_the_session(env: LiveBase) -> None:
    turn = await stamp_turn(env)
    assert any(name.endswith("stamp") for name in offered_tools(chat_bodies(env.provider)[0]))
    assert stamped(turn, env)["count"] == 1
    assert f"stamped {WORD}" in turn.text  # the answer reached the model
    assert "How to stamp." in json.dumps(chat_bodies(env.provider)[0])  # its skill, listed
    assert turn.proc.returncode == 0


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


# -- fast: prepare (no CLI) -------------------------------------------------------------------


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


def test_prepare_builds_env_from_nothing_and_offline_settings(tmp_path: Path) -> None:
    invocation = QwenCodeBase().prepare(fast_spec(tmp_path, disabled_tools=("web_fetch",)))
    assert invocation.cwd == "/workspace"
    assert set(invocation.env) == {
        "PATH",
        "HOME",
        "UHP_GATEWAY_TOKEN",
        "BASH_ENV",
        "QWEN_CODE_NO_RELAUNCH",
        "QWEN_CODE_LEGACY_MCP_BLOCKING",
        "LANG",
        "TERM",
    }
    assert invocation.env["UHP_GATEWAY_TOKEN"] == "uhpgw_turn_token"
    assert invocation.env["BASH_ENV"] == "/home/agent/.qwen/uhp/scrub-credentials.sh"
    assert "--append-system-prompt" not in invocation.argv
    settings = json.loads((tmp_path / "home" / ".qwen" / "settings.json").read_text())
    assert settings["permissions"] == {"deny": ["web_fetch"]}
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["general"]["enableAutoUpdate"] is False
    assert settings["tools"]["approvalMode"] == "yolo"
    assert settings["security"]["auth"] == {
        "selectedType": "openai",
        "baseUrl": "http://gateway.invalid/gateway/openai/v1",
        "apiKey": "$UHP_GATEWAY_TOKEN",  # Qwen Code expands it: the token is in no file
    }
    assert "uhpgw_turn_token" not in json.dumps(settings)
    script = tmp_path / "home" / ".qwen" / "uhp" / "scrub-credentials.sh"
    assert script.read_text() == qwen_config.SCRUB


def test_scrub_script_unsets_the_credentials(tmp_path: Path) -> None:
    QwenCodeBase().prepare(fast_spec(tmp_path))
    script = tmp_path / "home" / ".qwen" / "uhp" / "scrub-credentials.sh"
    env = {"PATH": "/usr/bin:/bin", "BASH_ENV": str(script), "UHP_GATEWAY_TOKEN": "k", "UHP_X": "y"}
    out = subprocess.run(["bash", "-c", "env"], env=env, capture_output=True, text=True).stdout
    assert "UHP_" not in out and "BASH_ENV" not in out and "PATH=" in out


def test_skills_written_whole_and_removed_when_gone(tmp_path: Path) -> None:
    skill = SkillBundle(
        "tidy", (SkillFile("SKILL.md", b"# tidy\n"), SkillFile("bin/run", b"#!/bin/sh\n"))
    )
    QwenCodeBase().prepare(fast_spec(tmp_path, skills=(skill,)))
    folder = tmp_path / "home" / ".qwen" / "skills" / "tidy"
    assert (folder / "SKILL.md").read_bytes() == b"# tidy\n"
    assert os.access(folder / "bin" / "run", os.X_OK)
    QwenCodeBase().prepare(fast_spec(tmp_path))
    assert not folder.exists()


def test_a_plugin_s_stdio_server_is_in_settings_beside_the_remote_ones(tmp_path: Path) -> None:
    vault = McpServerSpec("vault", "http://gateway.invalid/mcp/vault", "uhpgw_turn_token")
    launch = stdio_launches((stamp_plugin(),), SandboxPaths())
    QwenCodeBase().prepare(fast_spec(tmp_path, mcp_servers=(vault,), stdio_servers=launch))
    settings = json.loads((tmp_path / "home" / ".qwen" / "settings.json").read_text())
    servers = "/home/agent/.uhp/plugin-servers"
    assert settings["mcpServers"] == {
        "vault": {
            "httpUrl": "http://gateway.invalid/mcp/vault",
            "headers": {"Authorization": "Bearer $UHP_MCP_TOKEN_0"},
            "trust": True,
            "alwaysLoadTools": True,
        },
        "stamp": {
            "command": PYTHON,
            "args": [*LAUNCHER_ARGS, f"{servers}/stamp.json"],
            "trust": True,
            "alwaysLoadTools": True,
        },
    }


def test_the_appended_system_prompt_says_where_each_skill_is(tmp_path: Path) -> None:
    skill = SkillBundle(
        "codes", (SkillFile("SKILL.md", b"---\nname: codes\ndescription: Reads codes.\n---\n"),)
    )
    invocation = QwenCodeBase().prepare(
        fast_spec(tmp_path, system_prompt="Be brief. ", skills=(skill,))
    )
    appended = invocation.argv[invocation.argv.index("--append-system-prompt") + 1]
    assert appended.startswith("Be brief.\n\nSkills are installed for you")
    assert appended.endswith("\n- codes: /home/agent/.qwen/skills/codes/SKILL.md (Reads codes.)")


# The stamp server, but one that ends after its first call (the CLI then starts it again).
ONCE_SERVER = STDIO_SERVER.replace(
    '            reply(message_id, {"content": [{"type": "text", "text": answer(word)}]})',
    '            reply(message_id, {"content": [{"type": "text", "text": answer(word)}]})\n'
    "            sys.exit(0)",
)


@pytest.mark.slow
async def test_what_the_agent_writes_in_the_home_never_runs_with_the_clis_credentials(
    env: LiveBase,
) -> None:
    """The launcher starts with the CLI's whole environment and keeps a few variables for
    the plugin's process. Qwen Code starts a stdio server again when it has ended, so the
    agent rewrites what it can between the two starts: the server's launch file, now naming
    a program of its own. That program runs, as the plugin would, without the CLI's
    credentials; the launcher's code is in the command line, never a file the agent can
    replace (review of issue 26)."""
    leak = env.workspace / "leak.txt"
    evil = env.workspace / "evil.py"
    evil.write_text(f"import os\nopen({str(leak)!r}, 'w').write(repr(sorted(os.environ)))\n")
    files = (
        SkillFile("plugin.json", b"{}"),
        SkillFile("bin/stamp", ONCE_SERVER.encode(), executable=True),
    )
    plugin = PluginPackage("demo-plugin", files, (StdioServer("stamp", "./bin/stamp"),))
    paths = env.spec("x").paths
    fields: dict = {"plugins": (plugin,), "stdio_servers": stdio_launches((plugin,), paths)}
    place_plugins(env.spec("x", **fields))
    rewritten = env.workspace / "stamp.json"
    rewritten.write_text(
        json.dumps(
            {
                "command": PYTHON,
                "root": str(env.workspace),
                "data": str(env.workspace / "data"),
                "args": [str(evil)],
                "env": {},
                "cwd": str(env.workspace),
            }
        )
    )
    launch_file = f"{paths.home}/.uhp/plugin-servers/stamp.json"
    prompt = (
        'TOOL mcp__stamp__stamp {"word": "a"}\n'
        f"RUN cp {rewritten} {launch_file}\n"
        'TOOL mcp__stamp__stamp {"word": "b"}\n'
        "SAY {outputs}"
    )
    await env.run(prompt, **fields)
    assert not leak.exists() or "UHP_" not in leak.read_text()
