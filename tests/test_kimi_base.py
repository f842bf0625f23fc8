"""The Kimi CLI base against the real pinned CLI (`kimi acp` through our launcher, on its
private Python) and the scripted provider (no sandbox), plus fast checks of prepare().
`UHP_CAPTURE_KIMI_FIXTURES=1` rewrites the parser fixtures (harness_bases/kimi/fixtures/) from
these turns."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import ImageInput, McpServerSpec, SkillBundle, SkillFile, TurnSpec
from harness_bases.kimi import KimiBase
from harness_bases.kimi import config as kimi_config
from harness_bases.kimi import install as installer
from harness_bases.kimi.acp_launcher import STOPPED_CALL
from harness_bases.messages import RESUME_FAILED_NOTICE
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.live_base import LiveBase, capturing, chat_bodies, offered_tools, system_text
from tests.support.mcp_server import assert_vault_answered, vault_turn
from tests.support.plugin_turn import WORD, stamp_turn, stamped

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "kimi" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_KIMI_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def kimi_installed() -> Path:
    return installed_tools("kimi")


@pytest.fixture
def env(kimi_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(
        KimiBase(), provider, kimi_installed, tmp_path, timeout=180, fixtures=CAPTURE
    )


@pytest.mark.slow
async def test_text_streams_as_deltas_and_no_call_is_made_behind_the_agents_back(
    env: LiveBase,
) -> None:
    turn = await env.run("SAY hello world", capture="text")
    assert len(turn.of(ev.TextDelta)) > 1 and turn.text == "hello world"
    assert isinstance(turn.outcome, ev.TurnFinished)
    assert len(chat_bodies(env.provider)) == 1  # no title generation, no other model call
    assert turn.proc.returncode == 0


@pytest.mark.slow
async def test_tool_call_and_reasoning(env: LiveBase) -> None:
    turn = await env.run("THINK first this\nRUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    # Started once its streamed arguments were whole, with all of them.
    assert started.name == "Shell" and json.loads(started.arguments) == {"command": "echo hi"}
    assert turn.of(ev.ToolCallFinished) == [ev.ToolCallFinished(started.call, "hi\n", True)]
    assert any(done.text == "first this" for done in turn.of(ev.ReasoningDone))
    assert turn.text == "got hi"


@pytest.mark.slow
async def test_failed_command_is_not_ok(env: LiveBase) -> None:
    turn = await env.run("RUN exit 3\nSAY done", capture="tool_failure")
    assert [f.ok for f in turn.of(ev.ToolCallFinished)] == [False]


@pytest.mark.slow
async def test_resume_remembers_and_a_lost_session_starts_fresh(env: LiveBase) -> None:
    first = await env.run("REMEMBER walrus")
    again = await env.run("RECALL", native_session_id=first.native_id, capture="resume")
    assert again.native_id == first.native_id and again.text == "you said walrus"
    lost = await env.run(
        "SAY fresh",
        native_session_id="00000000-0000-0000-0000-000000000000",
        capture="resume_missing",
    )
    assert lost.events[0] == ev.Notice(RESUME_FAILED_NOTICE) and lost.text == "fresh"


@pytest.mark.slow
async def test_provider_failure_is_a_provider_error(env: LiveBase) -> None:
    turn = await env.run("FAIL 400 the upstream refused this", capture="provider_failure")
    assert turn.outcome == ev.TurnFailed("the upstream refused this", "provider_error")


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
async def test_a_step_stopped_while_its_tool_runs_stays_in_the_conversation(
    env: LiveBase,
) -> None:
    """Kimi writes a step only once its tools returned: stopped before (a cancel, a question
    parked), the step vanished and the next turn's model never saw its call (acp_launcher.py,
    10). Kept here: the call, answered as stopped."""
    turn = await env.run(
        "RUN sleep 30\nSAY slept",
        interrupt_when=lambda t: bool(t.of(ev.ToolCallStarted)),
    )
    assert not isinstance(turn.outcome, ev.TurnFinished)
    env.provider.reset()
    after = await env.run("SAY after", native_session_id=turn.native_id)
    assert after.text == "after"
    (body,) = chat_bodies(env.provider)
    (call,) = [c for m in body["messages"] for c in m.get("tool_calls") or []]
    assert "sleep 30" in call["function"]["arguments"]
    (result,) = [m for m in body["messages"] if m["role"] == "tool"]
    assert result["tool_call_id"] == call["id"]
    assert STOPPED_CALL in json.dumps(result["content"])


@pytest.mark.slow
async def test_parallel_calls_with_interleaved_arguments_each_get_their_own(
    env: LiveBase,
) -> None:
    """The scripted provider streams two calls' argument pieces interleaved by `index`, as
    Chat Completions allows; Kimi's client joined them to the last call (acp_launcher.py, 9)."""
    turn = await env.run("PARALLEL RUN echo alpha-17\nPARALLEL RUN echo beta-29\nSAY {outputs}")
    started = turn.of(ev.ToolCallStarted)
    assert sorted(json.loads(s.arguments)["command"] for s in started) == [
        "echo alpha-17",
        "echo beta-29",
    ]
    assert sorted(f.output for f in turn.of(ev.ToolCallFinished)) == ["alpha-17\n", "beta-29\n"]


@pytest.mark.slow
async def test_tool_commands_do_not_inherit_credentials(env: LiveBase) -> None:
    mcp = (McpServerSpec("vault", "http://127.0.0.1:9/mcp", "mcp-tok-1"),)
    turn = await env.run("RUN env\nSAY done", mcp_servers=mcp)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert "HOME=" in finished.output
    for leaked in ("UHP_", PROVIDER_KEY, "mcp-tok", env.gateway_token or "uhpgw_"):
        assert leaked not in finished.output


@pytest.mark.slow
async def test_disabled_tool_is_blocked_hard_and_back_when_enabled(env: LiveBase) -> None:
    blocked = await env.run("RUN echo ran\nSAY {output}", disabled_tools=("Shell",))
    assert all("Shell" not in offered_tools(body) for body in chat_bodies(env.provider))
    assert blocked.text == "no shell tool"  # the scripted model found none to call
    # A model that calls it anyway is refused, and the task shows it.
    forced = await env.run(
        'TOOL Shell {"command": "touch proof"}\nSAY {output}', disabled_tools=("Shell",)
    )
    (finished,) = forced.of(ev.ToolCallFinished)
    assert not finished.ok
    assert not (env.workspace / "proof").exists()
    # Its question tool is never offered: in ACP mode it answers nothing.
    assert all("AskUserQuestion" not in offered_tools(b) for b in chat_bodies(env.provider))
    env.provider.reset()
    again = await env.run("RUN echo ran\nSAY {output}", native_session_id=blocked.native_id)
    assert "Shell" in offered_tools(chat_bodies(env.provider)[0])
    assert again.text.strip() == "ran"


@pytest.mark.slow
async def test_system_prompt_reaches_the_model_and_follows_each_turn(env: LiveBase) -> None:
    first = await env.run("SAY one", system_prompt="Always answer like a pirate 7731.")
    await env.run("SAY two", system_prompt="Beta rule 8842.", native_session_id=first.native_id)
    systems = [system_text(body) for body in chat_bodies(env.provider)]
    assert "pirate 7731" in systems[0]
    assert "Beta rule 8842" in systems[1] and "pirate 7731" not in systems[1]


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
    folder = env.home / kimi_config.SKILLS_DIR / "uhp-zebra"
    path = f"/home/agent/{kimi_config.SKILLS_DIR}/uhp-zebra/SKILL.md"
    turn = await env.run(f"RUN cat {folder / 'SKILL.md'}\nSAY {{output}}", skills=(skill,))
    assert "Knows the zebra-42 word." in system_text(chat_bodies(env.provider)[0])
    assert path in system_text(chat_bodies(env.provider)[0]) or "uhp-zebra" in turn.text
    assert "zebra-42" in turn.text
    assert (folder / "notes" / "more.txt").read_bytes() == b"more zebra\n"
    await env.run("SAY gone", native_session_id=turn.native_id)  # the skill is disabled
    assert not folder.exists()


@pytest.mark.slow
async def test_mcp_server_is_reached_with_its_bearer_token(env: LiveBase) -> None:
    turn, server = await vault_turn(env, "lookup")
    assert_vault_answered(turn, server)
    config_file = env.home / kimi_config.SHARE_DIR / kimi_config.CONFIG_FILE
    assert "mcp-tok-1" not in config_file.read_text()


@pytest.mark.slow
async def test_a_plugin_s_stdio_server_runs_in_the_session(env: LiveBase) -> None:
    turn = await stamp_turn(env, "stamp")
    assert stamped(turn, env)["count"] == 1
    assert f"stamped {WORD}" in turn.text  # the answer reached the model
    assert turn.proc.returncode == 0


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


def test_prepare_builds_env_from_nothing_and_a_config_without_secrets(tmp_path: Path) -> None:
    spec = fast_spec(tmp_path, disabled_tools=("FetchURL",), system_prompt="Be brief 5521.")
    invocation = KimiBase().prepare(spec)
    assert invocation.argv == [
        "/opt/uhp-tools/kimi/1.51.0/python/bin/python3",
        "-s",  # never the session home's user site-packages (harness_bases/python_start.py)
        "/opt/uhp-tools/kimi/1.51.0/uhp_acp_launcher.py",
    ]
    assert invocation.argv == installer.command("/opt/uhp-tools")
    assert invocation.cwd == "/workspace"
    assert invocation.env["UHP_GATEWAY_TOKEN"] == "uhpgw_turn_token"
    assert invocation.env["KIMI_SHARE_DIR"] == "/home/agent/.kimi"
    assert invocation.env["UHP_KIMI_AGENT_FILE"] == "/home/agent/.kimi/uhp-agent.yaml"
    assert json.loads(invocation.env["UHP_KIMI_DISABLED_TOOLS"]) == ["FetchURL"]
    assert invocation.env["KIMI_DISABLE_TELEMETRY"] == "1"
    assert not {"OPENAI_API_KEY", "OPENAI_BASE_URL", "KIMI_API_KEY"} & set(invocation.env)
    folder = tmp_path / "home" / kimi_config.SHARE_DIR
    text = (folder / kimi_config.CONFIG_FILE).read_text()
    assert "uhpgw_turn_token" not in text

    written = tomllib.loads(text)
    assert written["providers"] == {
        "uhp": {
            "type": "openai_legacy",
            "base_url": "http://gateway.invalid/gateway/openai/v1",
            "api_key": "",
        }
    }
    assert written["models"]["uhp"]["model"] == MODEL and written["default_model"] == "uhp"
    assert written["default_yolo"] is True and written["telemetry"] is False
    agent = json.loads((folder / kimi_config.AGENT_FILE).read_text())
    assert agent["agent"]["extend"] == "default"
    assert agent["agent"]["system_prompt_args"] == {"ROLE_ADDITIONAL": "Be brief 5521."}


def test_an_image_turn_declares_the_model_takes_images(tmp_path: Path) -> None:

    image = ImageInput(path="/workspace/a.png", media_type="image/png", host_path=tmp_path / "a")
    KimiBase().prepare(fast_spec(tmp_path, images=(image,)))

    text = (tmp_path / "home" / kimi_config.SHARE_DIR / kimi_config.CONFIG_FILE).read_text()
    assert tomllib.loads(text)["models"]["uhp"]["capabilities"] == ["image_in"]
