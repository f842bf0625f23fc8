"""MiniSweAgentBase against the real pinned mini-swe-agent (its Python API, through the base's
driver) and the scripted provider (no sandbox), plus the parser on replayed real output.

The library comes from the `mini_installed` fixture (MiniSweAgentBase.install into the tools
cache, once per machine). Set UHP_CAPTURE_MINI_FIXTURES=1 to rewrite the parser fixtures in
harness_bases/mini_swe_agent/fixtures/ from these live runs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import ImageInput, SkillBundle, SkillFile
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.mini_swe_agent import MiniSweAgentBase
from harness_bases.mini_swe_agent import config as mini_config
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.direct_turn import OUTCOMES
from tests.support.live_base import LiveBase, capturing, chat_bodies, offered_tools, system_text
from tests.test_parallel_images_e2e import png, seen

FIXTURES = Path(__file__).parent.parent / "harness_bases" / "mini_swe_agent" / "fixtures"
CAPTURE = FIXTURES if capturing("UHP_CAPTURE_MINI_FIXTURES") else None
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def mini_installed() -> Path:
    return installed_tools("mini-swe-agent")


@pytest.fixture
def env(mini_installed: Path, provider: RunningProvider, tmp_path: Path) -> LiveBase:
    return LiveBase.fresh(
        MiniSweAgentBase(), provider, mini_installed, tmp_path, timeout=90, fixtures=CAPTURE
    )


@pytest.mark.slow
def test_installed_version(mini_installed: Path) -> None:
    base = MiniSweAgentBase()
    assert base.installed_version(mini_installed) == "2.4.6"
    assert base.installed_version(mini_installed.parent / "nowhere") is None


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
    (request,) = chat_bodies(env.provider)
    assert request["model"] == MODEL and request["stream"] is True
    assert offered_tools(request) == ["bash"]
    (raw,) = [r for r in env.provider.requests() if r["path"] == "/v1/chat/completions"]
    assert raw["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert turn.proc.returncode == 0


@pytest.mark.slow
async def test_tool_call_and_its_output(env: LiveBase) -> None:
    turn = await env.run("RUN echo hi\nSAY got {output}", capture="tool_call")
    (started,) = turn.of(ev.ToolCallStarted)
    (finished,) = turn.of(ev.ToolCallFinished)
    assert started.name == "bash"
    assert json.loads(started.arguments) == {"command": "echo hi"}
    assert finished == ev.ToolCallFinished(started.call, "hi\n", True)
    assert turn.text == "got hi"
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_a_failing_command_is_not_ok_and_sees_no_secret(env: LiveBase) -> None:
    turn = await env.run("RUN env; exit 3\nSAY done", capture="failing_tool")
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok
    assert "UHP_" not in finished.output and PROVIDER_KEY not in finished.output
    assert isinstance(turn.events[-1], ev.TurnFinished)


@pytest.mark.slow
async def test_thinking_streams_as_reasoning(env: LiveBase) -> None:
    turn = await env.run("THINK plan the work carefully\nSAY x", capture="thinking")
    deltas = turn.of(ev.ReasoningDelta)
    (done,) = turn.of(ev.ReasoningDone)
    assert len(deltas) > 1 and "".join(d.delta for d in deltas) == done.text
    assert done.text == "plan the work carefully"
    assert turn.text == "x"


@pytest.mark.slow
async def test_resume_remembers_and_a_lost_session_says_so(env: LiveBase) -> None:
    first = await env.run("REMEMBER apple")
    assert first.text == "noted apple"
    second = await env.run("RECALL", native_session_id=first.native_id, capture="resume")
    assert second.native_id == first.native_id
    assert second.text == "you said apple"
    assert not second.of(ev.Notice)
    shutil.rmtree(env.home / mini_config.HOME_DIR / mini_config.SESSIONS_DIR)
    lost = await env.run("RECALL", native_session_id=first.native_id, capture="resume_lost")
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
    assert turn.outcome_at is None and turn.proc.returncode == 0
    again = await env.run("SAY after", native_session_id=turn.native_id)
    assert again.text == "after" and not again.of(ev.Notice)


@pytest.mark.slow
async def test_interrupt_stops_a_running_command(env: LiveBase) -> None:
    turn = await env.run(
        "RUN sleep 60\nSAY never",
        interrupt_when=lambda t: bool(t.of(ev.ToolCallStarted)),
    )
    assert turn.interrupted_at is not None
    (finished,) = turn.of(ev.ToolCallFinished)
    assert not finished.ok
    assert turn.proc.returncode == 0


@pytest.mark.slow
async def test_disabled_bash_is_never_offered(env: LiveBase) -> None:
    turn = await env.run("RUN echo hi\nSAY got {output}", disabled_tools=("bash",))
    assert not turn.of(ev.ToolCallStarted)
    (request,) = chat_bodies(env.provider)
    assert offered_tools(request) == []
    assert turn.text == "no shell tool"


@pytest.mark.slow
async def test_system_prompt_and_skills_reach_the_model(env: LiveBase) -> None:
    skill = SkillBundle(
        "release-notes",
        (SkillFile("SKILL.md", b"---\nname: release-notes\ndescription: Writes notes.\n---\nx"),),
    )
    turn = await env.run(
        "RUN cat ~/.mini-swe-agent/skills/release-notes/SKILL.md\nSAY {output}",
        system_prompt="Be brief.",
        skills=(skill,),
    )
    system = system_text(chat_bodies(env.provider)[0])
    assert "Be brief." in system and "release-notes" in system and "Writes notes." in system
    assert "description: Writes notes." in turn.text


@pytest.mark.slow
async def test_max_output_tokens_reaches_the_model(env: LiveBase) -> None:
    await env.run("SAY short", max_output_tokens=77)
    (request,) = chat_bodies(env.provider)
    assert request.get("max_tokens") == 77 or request.get("max_completion_tokens") == 77


def test_replayed_fixtures_parse() -> None:
    """Every captured run replays through the parser to the outcome it had."""
    from harness_bases.mini_swe_agent.parser import MiniParser

    found = sorted(FIXTURES.glob("*.jsonl"))
    assert found, "no fixtures captured"
    for path in found:
        parser = MiniParser(interrupt_requested=path.stem == "interrupted")
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


def test_prepare_passes_no_provider_key_and_the_prompt_not_in_argv(tmp_path: Path) -> None:
    from tests.support.direct_turn import direct_spec

    (tmp_path / "h").mkdir()
    (tmp_path / "w").mkdir()
    spec = direct_spec(
        "SAY secret prompt",
        model=MODEL,
        gateway_url="http://127.0.0.1:1/v1",
        home=tmp_path / "h",
        workspace=tmp_path / "w",
        tools=tmp_path / "t",
    )
    invocation = MiniSweAgentBase().prepare(spec)
    assert invocation.argv[1] == "-s"  # no user site-packages (harness_bases/python_start.py)
    assert not any("secret prompt" in a for a in invocation.argv)
    assert not any(k.startswith(("OPENAI", "ANTHROPIC")) for k in invocation.env)
    assert set(invocation.env) >= {"PATH", "HOME", "UHP_MINI_TURN", "UHP_GATEWAY_TOKEN"}
    settings = json.loads(Path(invocation.env["UHP_MINI_TURN"]).read_text())
    assert settings["token_env"] == "UHP_GATEWAY_TOKEN" and PROVIDER_KEY not in json.dumps(settings)
    assert os.stat(invocation.env["UHP_MINI_TURN"]).st_mode & 0o077 == 0


@pytest.mark.slow
async def test_images_reach_the_model(env: LiveBase) -> None:
    data = png((200, 30, 30))
    (env.workspace / "red.png").write_bytes(data)
    image = ImageInput(env.workspace / "red.png", str(env.workspace / "red.png"), "image/png")
    turn = await env.run("IMAGES", images=(image,))
    assert turn.text == f"images 1: {seen(data)}"
