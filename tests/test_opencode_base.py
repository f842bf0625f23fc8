"""The OpenCode base against the real pinned CLI (`opencode acp`) and the scripted provider
(no sandbox), plus fast checks of prepare()."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from harness_bases import events as ev
from harness_bases.base import McpServerSpec, SkillBundle, SkillFile, TurnSpec
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.opencode import OpenCodeBase
from harness_bases.opencode import config as oc_config
from harness_bases.opencode import install as installer
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.connect_trace import outside_connections, strace_wrap
from tests.support.direct_turn import DirectTurn
from tests.support.live_base import LiveBase, capturing, chat_bodies, offered_tools
from tests.support.mcp_server import (
    assert_vault_answered,
    vault_turn,
)
from tests.support.plugin_turn import WORD, stamp_turn, stamped

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "opencode" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_OPENCODE_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def opencode_installed() -> Path:
    return installed_tools("opencode")


@pytest.fixture
def env(opencode_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(
        OpenCodeBase(), provider, opencode_installed, tmp_path, timeout=90, fixtures=CAPTURE
    )


# -- live: the real CLI -----------------------------------------------------------------------


@pytest.mark.heavy
def test_installed_version_and_install_is_idempotent(opencode_installed: Path) -> None:
    assert installer.installed_version(opencode_installed) == installer.CLI_VERSION
    installer.install(opencode_installed)  # already there: a no-op
    assert installer.installed_version(opencode_installed) == installer.CLI_VERSION


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
    turn = await env.run("THINK first this\nRUN echo hi\nSAY got {output}")
    (started,) = turn.of(ev.ToolCallStarted)
    assert started.name == "bash" and json.loads(started.arguments)["command"] == "echo hi"
    assert turn.of(ev.ToolCallFinished) == [ev.ToolCallFinished(started.call, "hi\n", True)]
    assert any(done.text == "first this" for done in turn.of(ev.ReasoningDone))
    assert turn.text == "got hi"


@pytest.mark.slow
async def test_failed_command_is_not_ok(env: LiveBase) -> None:
    turn = await env.run("RUN exit 3\nSAY done")
    assert [f.ok for f in turn.of(ev.ToolCallFinished)] == [False]


@pytest.mark.slow
async def test_resume_remembers_and_a_lost_session_starts_fresh(env: LiveBase) -> None:
    first = await env.run("REMEMBER walrus")
    again = await env.run("RECALL", native_session_id=first.native_id)
    assert again.native_id == first.native_id and again.text == "you said walrus"
    lost = await env.run("SAY fresh", native_session_id="ses_0000000000000000000000000")
    assert lost.events[0] == ev.Notice(RESUME_FAILED_NOTICE) and lost.text == "fresh"


@pytest.mark.slow
async def test_provider_failure_is_a_provider_error(env: LiveBase) -> None:
    turn = await env.run("FAIL 400 the upstream refused this")
    assert turn.outcome == ev.TurnFailed("the upstream refused this", "provider_error")


@pytest.mark.slow
async def test_interrupt_stops_slow_text_and_the_session_resumes(env: LiveBase) -> None:
    turn = await env.run(
        "SLOW 6\nSAY " + " ".join(f"w{i}" for i in range(40)),
        interrupt_when=lambda t: bool(t.of(ev.TextDelta)),
    )
    assert turn.interrupted_at is not None and turn.outcome_at is not None
    assert turn.outcome_at - turn.interrupted_at < 3.0
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
async def test_disabled_tool_is_blocked_hard_and_back_when_enabled(env: LiveBase) -> None:
    blocked = await env.run("RUN echo ran\nSAY {output}", disabled_tools=("bash",))
    assert all("bash" not in offered_tools(body) for body in chat_bodies(env.provider))
    assert blocked.text == "no shell tool"  # the scripted model found none to call
    # A model that calls it anyway is refused, and the task shows it.
    forced = await env.run(
        'TOOL bash {"command": "touch proof", "description": "x"}\nSAY {output}',
        disabled_tools=("bash",),
    )
    (finished,) = forced.of(ev.ToolCallFinished)
    assert "unavailable tool 'bash'" in finished.output and forced.text == finished.output
    assert not (env.workspace / "proof").exists()
    env.provider.reset()
    again = await env.run("RUN echo ran\nSAY {output}", native_session_id=blocked.native_id)
    assert "bash" in offered_tools(chat_bodies(env.provider)[0])
    assert again.text.strip() == "ran"


@pytest.mark.slow
async def test_system_prompt_reaches_the_model_and_follows_each_turn(env: LiveBase) -> None:
    first = await env.run("SAY one", system_prompt="Always answer like a pirate 7731.")
    await env.run("SAY two", system_prompt="Beta rule 8842.", native_session_id=first.native_id)
    systems = [json.dumps(body["messages"][0]) for body in chat_bodies(env.provider)]
    assert "pirate 7731" in systems[0]
    assert "Beta rule 8842" in systems[1] and "pirate 7731" not in systems[1]


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
    turn = await env.run('TOOL skill {"name": "uhp-zebra"}\nSAY {output}', skills=(skill,))
    assert "Knows the zebra-42 word." in json.dumps(chat_bodies(env.provider)[0])
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok and "zebra-42" in finished.output
    folder = env.home / oc_config.CONFIG_DIR / "skills" / "uhp-zebra"
    assert (folder / "notes" / "more.txt").read_bytes() == b"more zebra\n"
    await env.run("SAY gone", native_session_id=turn.native_id)  # the skill is disabled
    assert not folder.exists()


@pytest.mark.slow
async def test_mcp_server_is_reached_with_its_bearer_token(env: LiveBase) -> None:
    turn, server = await vault_turn(env, "vault_lookup")
    assert_vault_answered(turn, server)
    assert "mcp-tok-1" not in (env.home / oc_config.CONFIG_DIR / "opencode.json").read_text()


@pytest.mark.slow
async def test_a_plugin_s_stdio_server_runs_in_the_session(env: LiveBase) -> None:
    turn = await stamp_turn(env, "stamp_stamp")
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
    turn = await env.run("RUN echo hi\nSAY {output}", wrap=strace_wrap(strace, trace))
    assert turn.text.startswith("hi")
    # OpenCode serves itself on a loopback port it binds; that is not a way out.
    port = env.provider.url.rsplit(":", 1)[1]
    assert outside_connections(trace.read_text().splitlines(), port) == []


@pytest.mark.slow
async def test_the_cli_reads_the_empty_provider_catalogue_not_its_built_in_one(
    env: LiveBase,
) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("SKIPPED LOUDLY: no strace here, so the CLI's file reads cannot be traced")
    trace = env.home.parent / "open.trace"
    wrap = [strace, "-f", "-qq", "-e", "trace=openat", "-o", str(trace)]
    turn = await env.run("SAY hello", wrap=wrap)
    assert turn.text == "hello"
    catalogue = str(env.home / oc_config.CONFIG_DIR / oc_config.MODELS_FILE)
    assert f'"{catalogue}"' in trace.read_text()


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
    spec = fast_spec(tmp_path, disabled_tools=("webfetch",), system_prompt="Be brief 5521.")
    invocation = OpenCodeBase().prepare(spec)
    assert invocation.argv == [installer.binary_path("/opt/uhp-tools"), "acp", "--pure"]
    assert invocation.cwd == "/workspace"
    assert invocation.env["UHP_GATEWAY_TOKEN"] == "uhpgw_turn_token"
    assert invocation.env["SHELL"] == installer.shell_path("/opt/uhp-tools")
    assert not {"OPENAI_API_KEY", "OPENAI_BASE_URL"} & set(invocation.env)
    folder = tmp_path / "home" / oc_config.CONFIG_DIR
    text = (folder / "opencode.json").read_text()
    assert "uhpgw_turn_token" not in text
    written = json.loads(text)
    provider = written["provider"]["uhp"]
    assert provider["options"] == {
        "baseURL": "http://gateway.invalid/gateway/openai/v1",
        "apiKey": "{env:UHP_GATEWAY_TOKEN}",
    }
    assert written["model"] == "uhp/gpt-test" and written["enabled_providers"] == ["uhp"]
    assert written["permission"] == {"edit": "allow", "bash": "allow", "webfetch": "deny"}
    instructions = (folder / oc_config.INSTRUCTIONS_FILE).read_text()
    assert instructions == "Be brief 5521.\n\nDo not use these tools: webfetch."
    # The plugin package counts as present, so OpenCode never fetches it.
    assert (folder / "node_modules").is_dir() and (folder / "package-lock.json").is_file()
    # An empty provider catalogue: OpenCode never parses the one built into it.
    models_path = invocation.env["OPENCODE_MODELS_PATH"]
    assert models_path == f"/home/agent/{oc_config.CONFIG_DIR}/{oc_config.MODELS_FILE}"
    assert json.loads((folder / oc_config.MODELS_FILE).read_text()) == {}


@pytest.mark.slow
async def test_its_own_http_api_refuses_other_local_processes(env: LiveBase) -> None:
    """`opencode acp` serves an HTTP API on loopback, which the local sandbox shares with
    every other session: without this turn's password it answers 401."""
    ss = shutil.which("ss")
    if ss is None:
        pytest.skip("SKIPPED LOUDLY: no ss here, so the CLI's listening port cannot be found")
    answers: dict[str, int] = {}

    def probe(turn: DirectTurn) -> bool:
        if turn.of(ev.TextDelta) and not answers:
            listing = subprocess.run([ss, "-ltnpH"], capture_output=True, text=True).stdout
            mine = [line for line in listing.splitlines() if f"pid={turn.proc.pid}," in line]
            for port in (re.findall(r":(\d+) ", line)[0] for line in mine):
                answers[port] = httpx.get(f"http://127.0.0.1:{port}/session", timeout=5).status_code
        return False

    turn = await env.run(
        "SLOW 3\nSAY " + " ".join(f"w{i}" for i in range(20)), interrupt_when=probe
    )
    assert answers, "its HTTP API was not found"
    assert set(answers.values()) == {401}
    assert isinstance(turn.outcome, ev.TurnFinished)  # the CLI itself still got through
