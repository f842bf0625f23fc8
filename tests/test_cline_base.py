"""The Cline base against the real pinned CLI (`cline --acp`) and the scripted provider
(no sandbox), plus fast checks of prepare(). `UHP_CAPTURE_CLINE_FIXTURES=1` rewrites the parser
fixtures (harness_bases/cline/fixtures/) from these turns."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import McpServerSpec, SkillBundle, SkillFile, TurnSpec
from harness_bases.cline import ClineBase
from harness_bases.cline import config as cline_config
from harness_bases.cline import install as installer
from harness_bases.messages import RESUME_FAILED_NOTICE
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.live_base import LiveBase, capturing, chat_bodies

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "cline" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_CLINE_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def cline_installed() -> Path:
    return installed_tools("cline")


@pytest.fixture
def env(cline_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(
        ClineBase(), provider, cline_installed, tmp_path, timeout=180, fixtures=CAPTURE
    )


# -- live: the real CLI -----------------------------------------------------------------------


@pytest.mark.heavy
def test_installed_version_and_install_is_idempotent(cline_installed: Path) -> None:
    assert installer.installed_version(cline_installed) == installer.CLI_VERSION
    installer.install(cline_installed)  # already there: a no-op
    assert installer.installed_version(cline_installed) == installer.CLI_VERSION


@pytest.mark.slow
async def test_text_streams_as_deltas_and_no_call_is_made_behind_the_agents_back(
    env: LiveBase,
) -> None:
    turn = await env.run("SAY hello world", capture="text")
    assert len(turn.of(ev.TextDelta)) > 1 and turn.text == "hello world"
    assert isinstance(turn.outcome, ev.TurnFinished)
    assert len(chat_bodies(env.provider)) == 1  # no title generation, no other model call
    assert not (env.home / ".npm").exists()  # nothing was npm-installed


@pytest.mark.slow
async def test_tool_call_and_reasoning(env: LiveBase) -> None:
    turn = await env.run("THINK first this\nRUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    assert started.name == "run_commands"
    assert json.loads(started.arguments)["commands"] == ["echo hi"]
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
        "SAY fresh", native_session_id="ses_0000000000000000000000000", capture="resume_missing"
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
async def test_tool_commands_do_not_inherit_credentials(env: LiveBase) -> None:
    mcp = (McpServerSpec("vault", "http://127.0.0.1:9/mcp", "mcp-tok-1"),)
    turn = await env.run("RUN env\nSAY done", mcp_servers=mcp)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert "HOME=" in finished.output
    for leaked in ("UHP_", PROVIDER_KEY, "mcp-tok"):
        assert leaked not in finished.output


@pytest.mark.slow
async def test_disabled_tools_and_the_system_prompt_are_standing_instructions(
    env: LiveBase,
) -> None:
    first = await env.run(
        "SAY one", system_prompt="Always answer like a pirate 7731.", disabled_tools=("x_tool",)
    )
    await env.run("SAY two", system_prompt="Beta rule 8842.", native_session_id=first.native_id)
    systems = [json.dumps(body["messages"][0]) for body in chat_bodies(env.provider)]
    assert "pirate 7731" in systems[0] and "Do not use these tools: x_tool." in systems[0]
    assert "Beta rule 8842" in systems[1] and "pirate 7731" not in systems[1]


@pytest.mark.slow
async def test_skills_are_written_where_cline_looks_and_listed_to_the_model(
    env: LiveBase,
) -> None:
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
    turn = await env.run("SAY hi", skills=(skill,))
    assert "uhp-zebra" in json.dumps(chat_bodies(env.provider)[0])
    folder = env.home / cline_config.CONFIG_DIR / "skills" / "uhp-zebra"
    assert (folder / "notes" / "more.txt").read_bytes() == b"more zebra\n"
    await env.run("SAY gone", native_session_id=turn.native_id)  # the skill is disabled
    assert not folder.exists()


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
        assert f"htons({port})" in line and "127.0.0.1" in line, line


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
    spec = fast_spec(tmp_path, disabled_tools=("fetch_web_content",), system_prompt="Be brief.")
    invocation = ClineBase().prepare(spec)
    assert invocation.argv == [installer.binary_path("/opt/uhp-tools"), "--acp"]
    assert invocation.cwd == "/workspace"
    assert invocation.env["CLINE_API_KEY"] == "uhpgw_turn_token"
    assert invocation.env["CLINE_SESSION_BACKEND_MODE"] == "local"  # no hub daemon
    assert invocation.env["BASH_ENV"] == installer.scrub_path("/opt/uhp-tools")
    assert not {"OPENAI_API_KEY", "OPENAI_BASE_URL"} & set(invocation.env)
    settings = tmp_path / "home" / cline_config.SETTINGS_DIR / cline_config.PROVIDERS_FILE
    text = settings.read_text()
    assert "uhpgw_turn_token" not in text
    entry = json.loads(text)["providers"]["openai-compatible"]
    assert entry["settings"]["baseUrl"] == "http://gateway.invalid/gateway/openai/v1"
    assert entry["settings"]["model"] == MODEL and entry["updatedAt"]
    rule = tmp_path / "home" / cline_config.RULES_DIR / cline_config.RULE_FILE
    assert rule.read_text() == "Be brief.\n\nDo not use these tools: fetch_web_content."
    global_settings = settings.parent / cline_config.GLOBAL_SETTINGS_FILE
    assert json.loads(global_settings.read_text()) == {"telemetryOptOut": True}
    # Cline's bash reads ~/.bashrc (its stdin is a socket), not BASH_ENV: both scrub.
    bashrc = (tmp_path / "home" / ".bashrc").read_text()
    assert f". {installer.scrub_path('/opt/uhp-tools')}" in bashrc
    ClineBase().prepare(fast_spec(tmp_path))  # nothing to say: no rule left behind
    assert not rule.exists()


def test_mcp_servers_are_refused_for_this_base() -> None:
    assert ClineBase.mcp_transports == () and ClineBase.stdio_mcp is False
