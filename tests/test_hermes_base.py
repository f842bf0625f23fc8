"""HermesBase against the real pinned Hermes Agent in the real bubblewrap sandbox.

The model is the scripted provider, reached without a server (the sandbox's gateway socket
relays to it, tests/support/gateway_relay.py): these tests are about what the base makes of
Hermes. The venv runs from the read-only tools mount at
/opt/uhp-tools, as in production. The end-to-end suite (UHP_TEST_BASE=hermes) covers the
rest through a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness_bases import events as ev
from harness_bases.base import McpServerSpec, SandboxPaths, SkillBundle, SkillFile, TurnSpec
from harness_bases.hermes import HermesBase
from harness_bases.hermes.config import INSTRUCTIONS_FILE, TOKEN_ENV
from harness_bases.hermes.install import CLI_VERSION
from harness_bases.plugin_folders import place_plugins, stdio_launches
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider, start_provider
from tests.support.gateway_relay import inside, relay_app
from tests.support.installs import install_commands
from tests.support.mcp_server import ANSWER_PREFIX, RunningMcpServer
from tests.support.plugin_turn import SKILL, WORD, stamp_facts, stamp_plugin
from uhp_server.sandbox.base import SessionMounts
from uhp_server.sandbox.local import LocalSandbox

pytestmark = pytest.mark.slow

OUTCOMES = (ev.TurnFinished, ev.TurnFailed, ev.StepBudgetReached)
TURN_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def hermes_tools() -> Path:
    """The pinned Hermes, installed once into the shared tools cache."""
    return installed_tools("hermes")


@dataclass
class Turn:
    events: list[ev.AgentEvent]
    exit_seconds: float  # from the outcome to the process being gone

    @property
    def outcome(self) -> ev.AgentEvent:
        return next(e for e in self.events if isinstance(e, OUTCOMES))

    @property
    def text(self) -> str:
        return "".join(e.delta for e in self.events if isinstance(e, ev.TextDelta))

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def native(self) -> str:
        return self.of(ev.NativeSession)[0].id


@dataclass
class Session:
    """One session's folders, driven turn after turn like the engine does."""

    tools: Path
    root: Path
    provider: RunningProvider
    base: HermesBase = field(default_factory=HermesBase)

    def spec(self, prompt: str, **fields: Any) -> TurnSpec:
        fields["gateway_url"] = inside(fields.get("gateway_url", self.provider.base_url))
        fields["mcp_servers"] = tuple(
            dataclasses.replace(server, url=inside(server.url))
            for server in fields.get("mcp_servers", ())
        )
        return TurnSpec(
            prompt=prompt,
            model="gpt-test",
            gateway_token=PROVIDER_KEY,
            host_workspace=self.root / "workspace",
            host_home=self.root / "home",
            host_tools=self.tools,
            **fields,
        )

    async def run(self, prompt: str, interrupt_after: float | None = None, **fields: Any) -> Turn:
        spec = self.spec(prompt, **fields)
        place_plugins(spec)  # the turn's plugins in the home, as the engine places them
        sandbox = LocalSandbox()
        await sandbox.open(relay_app())
        mounts = SessionMounts(spec.host_workspace, spec.host_home, self.tools)
        proc = await sandbox.start(self.base.prepare(spec), mounts)
        events: list[ev.AgentEvent] = []
        try:
            async with asyncio.timeout(TURN_TIMEOUT):
                agent_turn = self.base.start_turn(proc, spec)
                async for event in agent_turn.events():
                    events.append(event)
                    if interrupt_after is not None and isinstance(event, ev.TextDelta):
                        await asyncio.sleep(interrupt_after)
                        await agent_turn.interrupt()
                        interrupt_after = None
                    if isinstance(event, OUTCOMES):
                        break
            finished = time.monotonic()
            await proc.close_stdin()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 20)
            return Turn(events, time.monotonic() - finished)
        finally:
            await proc.kill()

    def model_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.provider.requests() if r["path"] == "/v1/chat/completions"]


@pytest.fixture
def session(hermes_tools: Path, provider: RunningProvider, tmp_path: Path) -> Session:
    provider.reset()
    return Session(hermes_tools, tmp_path, provider)


def system_text(request: dict[str, Any]) -> str:
    return str(request["body"]["messages"][0]["content"])


def test_installed_version_and_install_is_idempotent(
    hermes_tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = HermesBase()
    assert base.installed_version(hermes_tools) == CLI_VERSION
    assert (
        install_commands(base, hermes_tools, monkeypatch) == []
    )  # already there: verified, not reinstalled
    venv = hermes_tools / "hermes" / CLI_VERSION / "venv"
    # Made with the system interpreter, so /usr inside a sandbox is all it needs.
    assert (venv / "bin" / "python").resolve() == Path("/usr/bin/python3").resolve()


async def test_a_turn_runs_in_the_sandbox_and_streams(session: Session) -> None:
    turn = await session.run("THINK weighing it\nRUN echo hi\nSAY got {output}")
    assert turn.outcome == ev.TurnFinished()
    assert turn.text == "got hi" and len(turn.of(ev.TextDelta)) > 1
    started = turn.of(ev.ToolCallStarted)[0]
    assert started.name == "terminal" and json.loads(started.arguments) == {"command": "echo hi"}
    assert turn.of(ev.ToolCallFinished)[0].output == "hi"
    assert turn.of(ev.ReasoningDone)[0].text == "weighing it"
    assert turn.exit_seconds < 10  # exits on its own once stdin closes
    # Every model call went to the configured endpoint with the turn's model and key.
    requests = session.model_requests()
    assert requests and {r["body"]["model"] for r in requests} == {"gpt-test"}
    assert {r["headers"]["authorization"] for r in requests} == {f"Bearer {PROVIDER_KEY}"}


async def test_config_names_the_token_never_holds_it(session: Session) -> None:
    await session.run("SAY fine")
    hermes_home = session.root / "home" / ".hermes"
    text = (hermes_home / "config.yaml").read_text()
    assert PROVIDER_KEY not in text
    config = yaml.safe_load(text)
    assert config["providers"]["uhp_gateway"]["key_env"] == TOKEN_ENV
    assert config["model"]["default"] == "gpt-test"


async def test_tool_commands_never_see_the_turn_credentials(session: Session) -> None:
    mcp = McpServerSpec("docs", "http://127.0.0.1:9/mcp", "uhpgw_mcp_secret")
    turn = await session.run("RUN env\nSAY {output}", mcp_servers=(mcp,))
    env = turn.of(ev.ToolCallFinished)[0].output
    assert "PATH=" in env
    assert "UHP_" not in env and PROVIDER_KEY not in env and "uhpgw_mcp_secret" not in env


async def test_resume_remembers_even_when_the_gateway_moved(session: Session) -> None:
    first = await session.run("REMEMBER apple")
    assert first.text == "noted apple"
    # A restarted server listens elsewhere: the next turn must use the new URL, not the
    # one Hermes recorded with the session.
    moved = start_provider(PROVIDER_KEY, ["gpt-test"])
    try:
        second = await session.run(
            "RECALL", native_session_id=first.native, gateway_url=moved.base_url
        )
        assert second.text == "you said apple"
        assert second.native == first.native and second.of(ev.Notice) == []
        assert [r["path"] for r in moved.requests() if r["path"] == "/v1/chat/completions"]
    finally:
        moved.stop()


async def test_a_lost_session_starts_fresh_and_says_so(session: Session) -> None:
    turn = await session.run("SAY fresh", native_session_id="00000000-0000-0000-0000-000000000000")
    assert turn.text == "fresh" and turn.outcome == ev.TurnFinished()
    assert [n.text for n in turn.of(ev.Notice)] == [
        "The earlier conversation could not be resumed; this turn starts a new one."
    ]


async def test_a_failed_turn_is_a_provider_error_and_is_not_asked_again(session: Session) -> None:
    failed = await session.run("FAIL 400 the upstream refused this")
    assert failed.outcome == ev.TurnFailed("HTTP 400: the upstream refused this", "provider_error")
    assert failed.text == ""
    again = await session.run("SAY recovered", native_session_id=failed.native)
    assert again.text == "recovered"
    # The failed prompt stays a turn of its own; it is not folded into the next one.
    last = session.model_requests()[-1]["body"]["messages"]
    users = [m["content"] for m in last if m["role"] == "user"]
    assert users == ["FAIL 400 the upstream refused this", "SAY recovered"]


async def test_instructions_reach_every_model_call_and_follow_changes(session: Session) -> None:
    first = await session.run(
        "RUN echo one\nSAY done",
        system_prompt="Answer like a pirate 7731.",
        disabled_tools=("browser_navigate",),
    )
    requests = session.model_requests()
    assert len(requests) == 2
    for request in requests:
        assert "pirate 7731" in system_text(request)
        assert "Do not use these tools: browser_navigate." in system_text(request)
    session.provider.reset()
    await session.run("SAY later", native_session_id=first.native, system_prompt="Be a poet 4411.")
    later = system_text(session.model_requests()[-1])
    assert "poet 4411" in later and "pirate 7731" not in later
    instructions = session.root / "home" / ".hermes" / INSTRUCTIONS_FILE
    assert instructions.read_text() == "Be a poet 4411."


async def test_skills_are_materialised_whole_and_listed(session: Session) -> None:
    skill = SkillBundle(
        "release-notes",
        (
            SkillFile(
                "SKILL.md",
                b"---\nname: release-notes\ndescription: Write release notes 5521.\n---\n"
                b"Read reference/format.md first.\n",
            ),
            SkillFile("reference/format.md", b"Use bullet points 8830.\n"),
        ),
    )
    prompt = 'TOOL skill_view {"name": "release-notes", "file_path": "reference/format.md"}\nSAY ok'
    turn = await session.run(prompt, skills=(skill,))
    assert "release-notes" in system_text(session.model_requests()[0])
    assert "bullet points 8830" in turn.of(ev.ToolCallFinished)[0].output
    # A skill no longer enabled is gone on the next turn.
    await session.run("SAY bye", native_session_id=turn.native)
    assert list((session.root / "home" / ".hermes" / "uhp-skills").iterdir()) == []


async def test_mcp_tools_reach_the_model_through_the_bearer_token(session: Session) -> None:
    server = RunningMcpServer("http").start()
    try:
        spec = McpServerSpec("vault", server.url, "uhpgw_mcp_token")
        prompt = 'TOOL mcp__vault__lookup {"code": "x1"}\nSAY {output}'
        turn = await session.run(prompt, mcp_servers=(spec,))
        tools = {t["function"]["name"] for t in session.model_requests()[0]["body"]["tools"]}
        assert "mcp__vault__lookup" in tools
        assert turn.of(ev.ToolCallStarted)[0].name == "mcp__vault__lookup"
        assert ANSWER_PREFIX + "x1" in turn.text
        assert {r.headers.get("authorization") for r in server.requests} == {
            "Bearer uhpgw_mcp_token"
        }
    finally:
        server.stop()


async def test_a_plugin_s_stdio_server_runs_inside_the_sandbox(session: Session) -> None:
    plugin = stamp_plugin()
    launch = stdio_launches((plugin,), SandboxPaths())
    prompt = f'TOOL mcp__stamp__stamp {{"word": "{WORD}"}}\nSAY {{output}}'
    turn = await session.run(prompt, plugins=(plugin,), stdio_servers=launch, skills=(SKILL,))
    assert SKILL.name in system_text(session.model_requests()[0])  # its skill, listed
    tools = {t["function"]["name"] for t in session.model_requests()[0]["body"]["tools"]}
    assert "mcp__stamp__stamp" in tools
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok and f"stamped {WORD}" in turn.text
    facts = stamp_facts(finished.output)
    # The sandbox's view of the session's home, and only the launcher's variables.
    assert facts["root"] == facts["cwd"] == "/home/agent/.uhp/plugins/stamp-plugin"
    assert facts["argv"] == ["--data", "/home/agent/.uhp/plugin-data/stamp-plugin/x"]
    assert "MODE" in facts["env"] and not [n for n in facts["env"] if "UHP" in n]
    # PLUGIN_DATA is the session's: the count the server keeps there is on the host side.
    data = session.root / "home" / ".uhp" / "plugin-data" / "stamp-plugin"
    assert (data / "count").read_text() == "1"


async def test_an_unreachable_mcp_server_is_a_notice_not_a_failure(session: Session) -> None:
    spec = McpServerSpec("vault", "http://127.0.0.1:9/mcp", "uhpgw_mcp_token")
    turn = await session.run("SAY still fine", mcp_servers=(spec,))
    assert turn.text == "still fine" and turn.outcome == ev.TurnFinished()
    assert any("vault" in n.text for n in turn.of(ev.Notice))


async def test_hermes_stops_itself_past_the_step_budget(session: Session) -> None:
    turn = await session.run("LOOP", max_step=1)
    assert turn.outcome == ev.StepBudgetReached()
    assert len(turn.of(ev.ToolCallStarted)) == 2  # the engine stops the turn at the second


async def test_interrupt_stops_a_slow_answer_and_the_process_exits(session: Session) -> None:
    turn = await session.run("SLOW 30\nSAY " + "word " * 40, interrupt_after=0.5)
    assert turn.text.startswith("word") and len(turn.text) < len("word " * 40)
    assert isinstance(turn.outcome, ev.TurnFailed)  # the engine reports `cancelled` itself
    assert turn.exit_seconds < 10


async def test_clarify_asks_through_the_turns_asker(session: Session) -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    async def ask(text: str, options: tuple[str, ...]) -> str | None:
        asked.append((text, options))
        return "blue-4471"

    question = json.dumps({"question": "Which colour?", "choices": ["red", "blue"]})
    prompt = f"TOOL clarify {question}\nSAY answer was {{output}}"
    turn = await session.run(prompt, ask_user=ask)
    assert asked == [("Which colour?", ("red", "blue"))]
    offered = {t["function"]["name"] for t in session.model_requests()[0]["body"]["tools"]}
    assert "clarify" in offered
    assert json.loads(turn.of(ev.ToolCallFinished)[0].output)["user_response"] == "blue-4471"
    assert "blue-4471" in turn.text and turn.outcome == ev.TurnFinished()
    # Without an asker (a plain task) Hermes' ACP mode is unchanged: no clarify tool.
    session.provider.reset()
    turn = await session.run(prompt)
    offered = {t["function"]["name"] for t in session.model_requests()[0]["body"]["tools"]}
    assert "clarify" not in offered and "blue-4471" not in turn.text


async def test_a_clarify_nobody_answers_ends_with_the_process(session: Session) -> None:
    """An answer that does not come (the turn parked): the request is refused and the
    engine ends the process; the agent is never left waiting on an answer."""

    async def no_answer(text: str, options: tuple[str, ...]) -> str | None:
        return None

    question = json.dumps({"question": "Which colour?"})
    turn = await session.run(f"TOOL clarify {question}\nSAY {{output}}", ask_user=no_answer)
    assert "Failed to get user input" in turn.text
