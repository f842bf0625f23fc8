"""CopilotBase against the real pinned GitHub Copilot CLI (`--output-format json`, its BYOK
provider at the scripted provider; no sandbox), plus the parser on replayed real output.

The CLI comes from the `copilot_installed` fixture (CopilotBase.install into the tools cache,
once per machine). Set UHP_CAPTURE_COPILOT_FIXTURES=1 to rewrite the parser fixtures in
harness_bases/copilot/fixtures/ from these live runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import ImageInput, SkillBundle, SkillFile
from harness_bases.copilot import CopilotBase
from harness_bases.copilot import config as copilot_config
from harness_bases.copilot.parser import CopilotParser
from harness_bases.messages import RESUME_FAILED_NOTICE
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.direct_turn import OUTCOMES, direct_spec
from tests.support.live_base import LiveBase, capturing, chat_bodies
from tests.support.mcp_server import ANSWER_PREFIX, VAULT_TOKEN, assert_vault_answered, vault_turn
from tests.test_parallel_images_e2e import png, seen

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "copilot" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_COPILOT_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def copilot_installed() -> Path:
    return installed_tools("copilot")


@pytest.fixture
def env(copilot_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(
        CopilotBase(), provider, copilot_installed, tmp_path, timeout=90, fixtures=CAPTURE
    )


def offered_tools(body: dict) -> list[str]:
    """The tools a request offers, function tools and Copilot's custom ones (apply_patch)."""
    return [(t.get("function") or t).get("name", "") for t in body.get("tools") or []]


def all_text(body: dict) -> str:
    return json.dumps(body.get("messages") or [], ensure_ascii=False)


@pytest.mark.slow
def test_installed_version(copilot_installed: Path) -> None:
    base = CopilotBase()
    assert base.installed_version(copilot_installed) == "1.0.102"
    assert base.installed_version(copilot_installed.parent / "nowhere") is None


@pytest.mark.slow
async def test_text_streams_real_deltas(env: LiveBase) -> None:
    turn = await env.run("SAY hello world, this is streamed", capture="text")
    deltas = turn.of(ev.TextDelta)
    assert len(deltas) > 1
    assert "".join(d.delta for d in deltas) == "hello world, this is streamed"
    assert turn.text == "hello world, this is streamed"
    assert isinstance(turn.events[-1], ev.TurnFinished)
    assert turn.events[0] == ev.NativeSession(turn.native_id)
    (request,) = chat_bodies(env.provider)
    assert request["model"] == MODEL and request["stream"] is True
    (raw,) = [r for r in env.provider.requests() if r["path"] == "/v1/chat/completions"]
    assert raw["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert turn.proc.returncode == 0
    # Its package is read from the tools folder, never unpacked into the agent home.
    assert not (env.home / ".cache" / "copilot").exists()
    assert sum(p.stat().st_size for p in env.home.rglob("*") if p.is_file()) < 5_000_000


@pytest.mark.slow
async def test_tool_call_and_its_output(env: LiveBase) -> None:
    turn = await env.run("RUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert started.name == "bash"
    assert json.loads(started.arguments)["command"] == "echo hi"
    assert finished == ev.ToolCallFinished(started.call, "hi", True)
    assert turn.text == "got hi"
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_a_failing_command_is_not_ok_and_sees_no_secret(env: LiveBase) -> None:
    turn = await env.run("RUN env; exit 3\nSAY done", capture="failing_tool")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok
    assert PROVIDER_KEY not in finished.output
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_thinking_streams_as_reasoning_closed_before_the_text(env: LiveBase) -> None:
    turn = await env.run("THINK plan the work carefully\nSAY x", capture="thinking")
    deltas = turn.of(ev.ReasoningDelta)
    (done,) = turn.of(ev.ReasoningDone)
    assert deltas and "".join(d.delta for d in deltas) == done.text
    assert done.text == "plan the work carefully"
    kinds = [type(e) for e in turn.events]
    assert kinds.index(ev.ReasoningDone) < kinds.index(ev.TextDelta)
    assert turn.text == "x"


@pytest.mark.slow
async def test_resume_remembers_and_a_lost_session_says_so(env: LiveBase) -> None:
    first = await env.run("REMEMBER apple")
    assert first.text == "noted apple"
    second = await env.run("RECALL", native_session_id=first.native_id, capture="resume")
    assert second.native_id == first.native_id
    assert second.text == "you said apple"
    assert not second.of(ev.Notice)
    shutil.rmtree(env.home / copilot_config.HOME_DIR / copilot_config.SESSIONS_DIR)
    lost = await env.run("RECALL", native_session_id=first.native_id)
    assert ev.Notice(RESUME_FAILED_NOTICE) in lost.events
    assert lost.native_id != first.native_id
    assert isinstance(lost.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_provider_failure(env: LiveBase) -> None:
    turn = await env.run("FAIL 400 bad request words", capture="provider_failure")
    assert turn.events[-1] == ev.TurnFailed("bad request words", "provider_error")
    assert not turn.of(ev.TextDone)


@pytest.mark.slow
async def test_interrupt_stops_slow_text_and_the_session_resumes(env: LiveBase) -> None:
    turn = await env.run(
        "SLOW 10\nSAY " + "word " * 40,
        interrupt_when=lambda t: t.first_text_at is not None,
        capture="interrupted",
    )
    assert turn.interrupted_at is not None
    assert not [e for e in turn.events if isinstance(e, OUTCOMES)]
    again = await env.run("SAY after", native_session_id=turn.native_id)
    assert again.text == "after" and not again.of(ev.Notice)


@pytest.mark.slow
async def test_a_disabled_tool_is_never_offered(env: LiveBase) -> None:
    turn = await env.run("RUN echo hi\nSAY got {output}", disabled_tools=("bash",))
    assert not turn.of(ev.ToolCallStarted)
    (request,) = chat_bodies(env.provider)
    assert "bash" not in offered_tools(request)
    assert turn.text == "no shell tool"


@pytest.mark.slow
async def test_system_prompt_and_skills_reach_the_model(env: LiveBase) -> None:
    skill = SkillBundle(
        "release-notes",
        (SkillFile("SKILL.md", b"---\nname: release-notes\ndescription: Writes notes.\n---\nx"),),
    )
    await env.run("SAY ok", system_prompt="Be brief, always.", skills=(skill,))
    (request,) = chat_bodies(env.provider)
    text = all_text(request) + json.dumps(request.get("tools") or [])
    assert "Be brief, always." in text
    assert "release-notes" in text and "Writes notes." in text


def test_replayed_fixtures_parse() -> None:
    """Every captured run replays through the parser to the outcome it had."""
    found = sorted(FIXTURES.glob("*.jsonl"))
    assert found, "no fixtures captured"
    for path in found:
        parser = CopilotParser(interrupt_requested=path.stem == "interrupted")
        events: list[ev.AgentEvent] = []
        for line in path.read_text().splitlines():
            events += parser.feed(json.loads(line))
        events += parser.at_eof()
        outcome = [e for e in events if isinstance(e, OUTCOMES)]
        if path.stem == "interrupted":
            assert outcome == []
        elif path.stem == "provider_failure":
            assert outcome == [ev.TurnFailed("bad request words", "provider_error")]
        else:
            assert outcome == [ev.TurnFinished()], path.name


def test_prepare_keeps_the_prompt_out_of_argv_and_no_key_in_files(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "w").mkdir()
    spec = direct_spec(
        "SAY secret prompt",
        model=MODEL,
        gateway_url="http://127.0.0.1:1/v1",
        home=tmp_path / "h",
        workspace=tmp_path / "w",
        tools=tmp_path / "t",
        system_prompt="standing",
        disabled_tools=("bash", "view"),
    )
    invocation = CopilotBase().prepare(spec)
    assert invocation.argv[:2] == ["/usr/bin/python3", "-s"]  # harness_bases/python_start.py
    assert not any("secret prompt" in a for a in invocation.argv)
    assert "--excluded-tools=bash,view" in invocation.argv
    assert not any(k.startswith(("OPENAI", "ANTHROPIC", "GITHUB", "GH_")) for k in invocation.env)
    for path in (tmp_path / "h").rglob("*"):
        if path.is_file():
            assert PROVIDER_KEY not in path.read_text(errors="replace"), path


@pytest.mark.slow
async def test_mcp_server_is_reached_with_its_bearer_token(env: LiveBase) -> None:
    turn, server = await vault_turn(env, "vault-lookup")
    offered = offered_tools(chat_bodies(env.provider)[0])
    assert any("lookup" in name for name in offered), offered
    assert_vault_answered(turn, server)
    assert turn.text.startswith(ANSWER_PREFIX)
    # The token is written only to the MCP config (mode 600), never to a log or transcript.
    mcp_file = env.home / ".copilot" / "uhp" / "mcp.json"
    assert mcp_file.stat().st_mode & 0o077 == 0
    for path in (env.home / ".copilot").rglob("*"):
        if path.is_file() and path != mcp_file:
            assert VAULT_TOKEN not in path.read_text(errors="replace"), path
    await env.run("SAY no servers now")
    assert not mcp_file.exists()


@pytest.mark.slow
async def test_images_reach_the_model(env: LiveBase) -> None:
    data = png((200, 30, 30))
    (env.workspace / "red.png").write_bytes(data)
    image = ImageInput(env.workspace / "red.png", str(env.workspace / "red.png"), "image/png")
    turn = await env.run("IMAGES", images=(image,))
    assert turn.text == f"images 1: {seen(data)}"
