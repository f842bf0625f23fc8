"""GeminiCliBase against the real pinned Gemini CLI (over ACP), through the real model gateway
(its Gemini wire translated to Chat Completions) to the scripted provider (no sandbox), plus
fast checks of prepare().

The CLI comes from the `gemini_installed` fixture (GeminiCliBase.install into the tools
cache, once per machine). Set UHP_CAPTURE_GEMINI_CLI_FIXTURES=1 to rewrite the parser
fixtures in harness_bases/gemini_cli/fixtures/ from these live runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import SkillBundle, SkillFile, TurnSpec
from harness_bases.gemini_cli import GeminiCliBase
from harness_bases.gemini_cli import config as gemini_config
from harness_bases.messages import RESUME_FAILED_NOTICE
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.gateway_server import RunningGateway
from tests.support.installs import install_commands
from tests.support.live_base import LiveBase, capturing, chat_bodies, offered_tools
from tests.support.mcp_server import (
    ANSWER_PREFIX,
    assert_vault_answered,
    vault_turn,
)
from tests.support.plugin_turn import WORD, stamp_turn, stamped

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "gemini_cli" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_GEMINI_CLI_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def gemini_installed() -> Path:
    """The pinned Gemini CLI and its node, installed once (CI installs them first)."""
    return installed_tools("gemini-cli")


@pytest.fixture(scope="module")
def gateway(provider: RunningProvider) -> Iterator[RunningGateway]:
    running = RunningGateway(provider.base_url, PROVIDER_KEY, MODEL)
    yield running
    running.stop()


@pytest.fixture
def env(
    gemini_installed: Path, provider: RunningProvider, gateway: RunningGateway, tmp_path: Path
) -> LiveBase:
    return LiveBase.fresh(
        GeminiCliBase(),
        provider,
        gemini_installed,
        tmp_path,
        timeout=120,
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        fixtures=CAPTURE,
    )


def conversation_text(body: dict) -> str:
    return json.dumps(body["messages"])


# -- live: the real CLI -----------------------------------------------------------------------


@pytest.mark.slow
def test_installed_version_and_install_is_idempotent(
    gemini_installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = GeminiCliBase()
    assert base.installed_version(gemini_installed) == "0.61.0"
    assert install_commands(base, gemini_installed, monkeypatch) == []  # already there: no npm run
    assert base.installed_version(gemini_installed.parent / "nowhere") is None


@pytest.mark.slow
def test_every_flag_is_one_the_pinned_cli_knows(env: LiveBase) -> None:
    invocation = env.base.prepare(env.spec("x", system_prompt="p"))
    help_text = subprocess.run(
        [*invocation.argv[:4], "--help"], env=invocation.env, capture_output=True, text=True
    ).stdout
    flags = [a for a in invocation.argv[4:] if a.startswith("--")]
    assert "--acp" in flags
    for flag in flags:
        assert re.search(rf"^\s+(-\w, )?{re.escape(flag)}\b", help_text, re.M), flag


@pytest.mark.slow
async def test_text_streams_real_deltas(env: LiveBase) -> None:
    turn = await env.run("SAY hello world, this is streamed", capture="text")
    deltas = turn.of(ev.TextDelta)
    assert len(deltas) > 1
    assert "".join(d.delta for d in deltas) == "hello world, this is streamed"
    assert turn.text == "hello world, this is streamed"
    # A new session's id is reported only when its first turn finishes.
    assert turn.events[-2:] == [ev.NativeSession(turn.native_id), ev.TurnFinished()]
    usage = turn.of(ev.Usage)
    assert usage and usage[-1].input_tokens > 0 and usage[-1].output_tokens > 0
    # One model call: no next-speaker check or loop detection behind the agent's back.
    (request,) = env.provider.requests()
    assert request["path"] == "/v1/chat/completions"
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
    # The CLI trims each streamed piece of a thought: "plan it" arrives as "plan", "it".
    assert next(d.text for d in turn.of(ev.ReasoningDone)) == "planit"
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_failed_silent_command_is_not_ok(env: LiveBase) -> None:
    turn = await env.run("RUN exit 3\nSAY done")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok and "3" in finished.output
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
    # Gemini CLI takes a cancelled prompt back out of its conversation and forgets a new
    # one left empty: no id is reported for it, so the next turn starts anew, no notice.
    assert not turn.of(ev.NativeSession)
    again = await env.run("SAY after the cancel")
    assert again.text == "after the cancel" and not again.of(ev.Notice)


@pytest.mark.slow
async def test_a_cancelled_or_failed_later_turn_keeps_the_earlier_conversation(
    env: LiveBase,
) -> None:
    first = await env.run("REMEMBER apple")
    assert first.of(ev.NativeSession)  # a finished first turn reports its session
    cancelled = await env.run(
        "SLOW 10\nSAY " + "word " * 40,
        interrupt_when=lambda t: t.first_text_at is not None,
        native_session_id=first.native_id,
    )
    assert cancelled.interrupted_at is not None and cancelled.native_id == first.native_id
    failed = await env.run("FAIL 400 refused", native_session_id=first.native_id)
    assert failed.outcome == ev.TurnFailed("refused", "provider_error")
    recalled = await env.run("RECALL", native_session_id=first.native_id)
    assert recalled.text == "you said apple" and not recalled.of(ev.Notice)


def _chat_files(home: Path, native_id: str) -> list[Path]:
    return sorted(
        home.glob(f"{gemini_config.CONFIG_DIR}/tmp/*/chats/session-*-{native_id[:8]}.jsonl")
    )


def _in_another_minute(conversation: Path, *minutes: str) -> Path:
    """The conversation's file named for the first of `minutes` ("HH-MM") it is not named for
    already (the CLI names a chat file `session-<date>T<HH-MM>-<short id>.jsonl`)."""
    for minute in minutes:
        name = re.sub(r"T\d\d-\d\d-", f"T{minute}-", conversation.name)
        if name != conversation.name:
            return conversation.parent / name
    raise AssertionError(f"{conversation.name} is named for each of {minutes}")


def _left_by_a_load_in_a_later_minute(conversation: Path) -> None:
    # What `session/load` leaves when it runs in a later minute than the conversation's
    # file was named in: a second file of the same session holding only its metadata.
    # (The cleanup groups files by short id, whatever their minute.)
    metadata = conversation.read_text().splitlines()[0]
    _in_another_minute(conversation, "23-59", "23-58").write_text(metadata + "\n")


def _idle_for_40_days(conversation: Path) -> None:
    stamp = re.compile(r'"(startTime|lastUpdated|timestamp)":"[^"]+"')
    old = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 40 * 86400))
    conversation.write_text(
        stamp.sub(lambda m: f'"{m.group(1)}":"{old}"', conversation.read_text())
    )


@pytest.mark.slow
@pytest.mark.parametrize("aged", [_left_by_a_load_in_a_later_minute, _idle_for_40_days])
async def test_the_cli_never_deletes_a_conversation_the_server_holds(
    env: LiveBase, aged: Callable[[Path], None]
) -> None:
    # The server alone decides when a session ends (DELETE /v1/sessions/{id}); Gemini CLI's
    # session cleanup, run as each of its processes starts, must not decide it instead.
    first = await env.run("REMEMBER apple")
    [conversation] = _chat_files(env.home, first.native_id)
    aged(conversation)
    recalled = await env.run("RECALL", native_session_id=first.native_id)
    assert recalled.text == "you said apple" and not recalled.of(ev.Notice)


@pytest.mark.slow
async def test_a_workspace_settings_file_does_not_turn_the_cleanup_back_on(
    env: LiveBase,
) -> None:
    # A workspace's `.gemini/settings.json` (a repository's, or one the agent wrote) outranks
    # the per-turn settings in the agent's home: the cleanup itself is taken out of the CLI.
    first = await env.run("REMEMBER apple")
    [conversation] = _chat_files(env.home, first.native_id)
    _left_by_a_load_in_a_later_minute(conversation)
    (env.workspace / ".gemini").mkdir()
    (env.workspace / ".gemini" / "settings.json").write_text(
        json.dumps({"general": {"sessionRetention": {"enabled": True, "maxAge": "1d"}}})
    )
    recalled = await env.run("RECALL", native_session_id=first.native_id)
    assert recalled.text == "you said apple" and not recalled.of(ev.Notice)


@pytest.mark.slow
async def test_a_conversation_resumed_in_a_later_minute_is_resumed_again(env: LiveBase) -> None:
    # The CLI itself leaves the metadata-only file: its conversation's file is named for an
    # earlier minute than the load's (renamed here: a minute need not pass during the test).
    first = await env.run("REMEMBER apple")
    [conversation] = _chat_files(env.home, first.native_id)
    conversation.rename(_in_another_minute(conversation, "00-00", "00-01"))
    again = await env.run("RECALL", native_session_id=first.native_id)
    assert again.text == "you said apple"
    assert len(_chat_files(env.home, first.native_id)) == 2  # the load's own file beside it
    recalled = await env.run("RECALL", native_session_id=first.native_id)
    assert recalled.text == "you said apple" and not recalled.of(ev.Notice)


@pytest.mark.slow
async def test_tool_commands_do_not_inherit_credentials(
    env: LiveBase, gateway: RunningGateway
) -> None:
    turn = await env.run("RUN env\nSAY {output}")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert "HOME=" in finished.output
    for leaked in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", gateway.token, PROVIDER_KEY):
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
    assert not [f for f in blocked.of(ev.ToolCallFinished) if f.ok and f.output == "ran"]
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
    bodies = chat_bodies(env.provider)
    last_user = [json.dumps([m for m in b["messages"] if m["role"] != "assistant"]) for b in bodies]
    assert "pirate 7731" in conversation_text(bodies[0])
    assert "Beta rule 8842" in conversation_text(bodies[1])
    assert "Beta rule" not in last_user[2].split("SAY two")[-1]


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
    turn = await env.run('TOOL activate_skill {"name": "uhp-zebra"}\nSAY {output}', skills=(skill,))
    assert "Knows the zebra-42 word." in json.dumps(chat_bodies(env.provider)[0])
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok and "zebra-42" in json.dumps(chat_bodies(env.provider)[-1])
    folder = env.home / ".gemini" / "skills" / "uhp-zebra"
    assert (folder / "notes" / "more.txt").read_bytes() == b"more zebra\n"
    await env.run("SAY gone", native_session_id=turn.native_id)
    assert not folder.exists()


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_mcp_tools_are_offered_reached_and_the_cli_still_exits(
    env: LiveBase, transport: str
) -> None:
    turn, server = await vault_turn(env, "lookup", transport)
    assert any(name.endswith("lookup") for name in offered_tools(chat_bodies(env.provider)[0]))
    assert_vault_answered(turn, server)
    assert ANSWER_PREFIX + "abc" in turn.text
    # Its stdin closed after the outcome, the CLI exited by itself (the MCP server's open
    # stream kept it running until it was killed, before the load hook's exit fix).
    assert turn.proc.returncode == 0
    assert "mcp-tok-1" not in json.dumps(
        [p.read_text(errors="replace") for p in env.home.rglob("*") if p.is_file()]
    )


@pytest.mark.slow
async def test_a_plugin_s_stdio_server_runs_in_the_session_and_the_cli_still_exits(
    env: LiveBase,
) -> None:
    turn = await stamp_turn(env)
    facts = stamped(turn, env)
    assert facts["count"] == 1
    assert f"stamped {WORD}" in turn.text  # the answer reached the model
    assert "How to stamp." in json.dumps(chat_bodies(env.provider)[0])  # its skill, listed
    assert turn.proc.returncode == 0  # the server's stdin closed with the CLI's


@pytest.mark.slow
async def test_the_cli_connects_to_nothing_but_the_gateway(
    env: LiveBase, gateway: RunningGateway
) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("SKIPPED LOUDLY: no strace here, so the CLI's connections cannot be traced")
    trace = env.home.parent / "connect.trace"
    wrap = [strace, "-f", "-qq", "-e", "trace=connect", "-o", str(trace)]
    turn = await env.run("RUN echo hi\nSAY {output}", wrap=wrap)
    assert turn.text == "hi"
    inet = [line for line in trace.read_text().splitlines() if "AF_INET" in line]
    assert inet, "no connection traced at all"
    for line in inet:
        assert f"htons({gateway.port})" in line and "127.0.0.1" in line, line


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
    spec = fast_spec(tmp_path, disabled_tools=("web_fetch",), system_prompt="Be a pirate.")
    invocation = GeminiCliBase().prepare(spec)
    assert invocation.cwd == "/workspace"
    hook = "file:///home/agent/.gemini/uhp/acp_fixes.mjs"
    assert invocation.argv[1:3] == ["--import", hook]
    assert invocation.argv[4:] == ["--acp", "--model", MODEL, "--approval-mode", "yolo"]
    assert invocation.env == {
        "PATH": invocation.env["PATH"],
        "HOME": "/home/agent",
        "GEMINI_API_KEY": "uhpgw_turn_token",
        "GOOGLE_GEMINI_BASE_URL": "http://gateway.invalid/gateway/openai/v1",
        "BASH_ENV": "/home/agent/.gemini/uhp/scrub-credentials.sh",
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    config_dir = tmp_path / "home" / ".gemini"
    settings = json.loads((config_dir / "settings.json").read_text())
    assert settings["tools"]["exclude"] == ["web_fetch"]
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["telemetry"]["enabled"] is False
    assert settings["general"]["enableAutoUpdate"] is False
    assert settings["ide"]["enabled"] is False
    assert settings["security"]["auth"] == {"selectedType": "gemini-api-key"}
    assert "uhpgw_turn_token" not in json.dumps(settings)
    assert (config_dir / "GEMINI.md").read_text() == "Be a pirate."
    assert (config_dir / "uhp" / "acp_fixes.mjs").read_text().startswith("// Written by")
    GeminiCliBase().prepare(fast_spec(tmp_path))
    assert not (config_dir / "GEMINI.md").exists()


def test_scrub_script_unsets_the_credentials(tmp_path: Path) -> None:
    GeminiCliBase().prepare(fast_spec(tmp_path))
    script = tmp_path / "home" / ".gemini" / "uhp" / "scrub-credentials.sh"
    assert script.read_text() == gemini_config.SCRUB
    env = {
        "PATH": "/usr/bin:/bin",
        "BASH_ENV": str(script),
        "GEMINI_API_KEY": "k",
        "GOOGLE_GEMINI_BASE_URL": "u",
    }
    out = subprocess.run(["bash", "-c", "env"], env=env, capture_output=True, text=True).stdout
    assert "GEMINI" not in out and "BASH_ENV" not in out and "PATH=" in out


def test_skills_written_whole_and_removed_when_gone(tmp_path: Path) -> None:
    skill = SkillBundle(
        "tidy", (SkillFile("SKILL.md", b"# tidy\n"), SkillFile("bin/run", b"#!/bin/sh\n"))
    )
    GeminiCliBase().prepare(fast_spec(tmp_path, skills=(skill,)))
    folder = tmp_path / "home" / ".gemini" / "skills" / "tidy"
    assert (folder / "SKILL.md").read_bytes() == b"# tidy\n"
    assert os.access(folder / "bin" / "run", os.X_OK)
    GeminiCliBase().prepare(fast_spec(tmp_path))
    assert not folder.exists()


ASKED_CITY = {
    "questions": [
        {
            "question": "Which city?",
            "header": "City",
            "type": "choice",
            "options": [
                {"label": "Paris", "description": "France"},
                {"label": "Rome", "description": "Italy"},
            ],
        }
    ]
}


@pytest.mark.slow
async def test_ask_user_asks_through_the_turns_asker(env: LiveBase) -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    async def ask(text: str, options: tuple[str, ...]) -> str | None:
        asked.append((text, options))
        return "Rome-8812"

    prompt = f"TOOL ask_user {json.dumps(ASKED_CITY)}\nSAY answer was {{output}}"
    turn = await env.run(prompt, ask_user=ask)
    assert "ask_user" in offered_tools(chat_bodies(env.provider)[0])
    assert asked == [("Which city?", ("Paris", "Rome"))]
    # The model reads the answers as the CLI's own dialog gives them.
    assert turn.text == 'answer was {"answers":{"0":"Rome-8812"}}'
    assert isinstance(turn.events[-1], ev.TurnFinished)
    # Without an asker (a plain task) the CLI's ACP mode is unchanged: no ask_user tool.
    env.provider.reset()
    await env.run("SAY fine")
    assert "ask_user" not in offered_tools(chat_bodies(env.provider)[0])


@pytest.mark.slow
async def test_a_question_left_unanswered_leaves_a_resumable_session(env: LiveBase) -> None:
    """An answer that does not come: the request is refused (the tool fails) and the turn
    ends; the next turn resumes the same conversation."""

    async def no_answer(text: str, options: tuple[str, ...]) -> str | None:
        return None

    prompt = f"REMEMBER kiwi\nTOOL ask_user {json.dumps(ASKED_CITY)}"
    first = await env.run(prompt, ask_user=no_answer)
    second = await env.run("RECALL", native_session_id=first.native_id)
    assert not second.of(ev.Notice) and second.text == "you said kiwi"
