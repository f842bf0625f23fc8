"""The engine in-process with a stand-in base that can ask the user, for fast engine tests
(the sandbox is tests/support/fakes.py's FakeSandbox).

The stand-in agent reads its prompt's last line as a script:
- `SAY <text>`: answers <text> (a literal `\\n` in it is a line break) and finishes;
- `WAIT <name>`: waits until the test calls `release(<name>)`, then answers "released";
- `ASK <question>`: asks the user through the engine's question tool, then answers
  "answer: <the user's answer>" (or fails when no answer came);
anything else is echoed back. Every prompt and system prompt it got is kept for checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.base import Enforcement, HarnessBase, Invocation, Process, TurnSpec
from harness_bases.turns import AgentTurn
from storage import keys
from storage.blobs import BlobStore
from storage.db import Database
from tests.support.fakes import AGENT_PROGRAM, FakeSandbox
from uhp_server.catalog import ModelCatalog
from uhp_server.engine.assembly import assemble_engine, assemble_environments
from uhp_server.engine.replicas.peers import NoPeers
from uhp_server.engine.turns.admission import AdmissionQueue
from uhp_server.engine.turns.executor import TurnExecutor
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.environments.builder import (
    BuildFailed,
    BuildProgress,
    BuildRequest,
    BuildResult,
    Runtimes,
)
from uhp_server.gateway.connection import ModelConnection
from uhp_server.gateway.tokens import TokenRegistry
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.sandbox.egress import EgressPolicy
from uhp_server.settings import Settings


async def _nothing_to_recover() -> None:
    """A stand-in engine starts on an empty database."""


CONNECTION = ModelConnection(base_url="http://127.0.0.1:9/v1", model="m", api_key="k")


class StandInTurn(AgentTurn):
    def __init__(self, base: StandInBase, spec: TurnSpec) -> None:
        super().__init__()
        self.base, self.spec = base, spec

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        base, spec = self.base, self.spec
        base.prompts.append(spec.prompt)
        base.system_prompts.append(spec.system_prompt)
        base.mcp_names.append(tuple(s.name for s in spec.mcp_servers))
        line = spec.prompt.strip().splitlines()[-1] if spec.prompt.strip() else ""
        verb, _, rest = line.partition(" ")
        base.sandbox_running(+1)
        try:
            yield ev.NativeSession(f"native-{len(base.prompts)}")
            if verb == "WAIT":
                await base.gate(rest).wait()
                text = "released"
            elif verb == "ASK":
                assert base.runs is not None
                run = base.runs.by_token(spec.gateway_token)
                assert run is not None
                answer = await base.runs.ask(run, rest, ("yes", "no"))
                if answer is None:
                    await asyncio.Event().wait()  # parked: the engine ends the turn
                text = f"answer: {answer}"
            elif verb == "SAY":
                text = rest.replace("\\n", "\n")  # a literal \n is a line break
            else:
                text = spec.prompt
            yield ev.TextDelta("m1", text)
            yield ev.TextDone("m1", text)
            yield ev.TurnFinished()
        finally:
            base.sandbox_running(-1)

    async def send_interrupt(self) -> bool:
        return True


class StandInBase(HarnessBase):
    name = "standin"
    label = "Stand-in"
    backend = "openai"
    wire = "chat"
    cli_version = "1"
    cli_pins = ()
    enforcement = Enforcement(disabled_tools="instruction", max_step="counted")
    state_dirs = ()
    conversation_paths = ()
    runtime_packages = ()
    host_packages = ()

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.system_prompts: list[str] = []
        self.mcp_names: list[tuple[str, ...]] = []
        self.runs: RunRegistry | None = None
        self.gates: dict[str, asyncio.Event] = {}
        self.running = 0
        self.most_running = 0

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def sandbox_running(self, change: int) -> None:
        self.running += change
        self.most_running = max(self.most_running, self.running)

    def install(self, tools_dir: Path) -> None:
        return None

    def installed_version(self, tools_dir: Path) -> str | None:
        return self.cli_version

    def prepare(self, turn: TurnSpec) -> Invocation:
        return Invocation(argv=[AGENT_PROGRAM], env={}, cwd=turn.paths.workspace)

    def start_turn(self, proc: Process, turn: TurnSpec) -> AgentTurn:
        return StandInTurn(self, turn)


class StandInEngine:
    """The engine (its facade and its run registry) over the stand-ins, on the caller's event
    loop."""

    def __init__(
        self,
        tmp_path: Path,
        max_turns: int = 4,
        keep_seconds: float = 30,
        per_principal: int | None = None,
    ) -> None:
        self.settings = Settings(
            data_dir=tmp_path / "data",
            tools_dir=tmp_path / "tools",
            model_connection_allow_private_hosts=True,
            OPENAI_API_KEY=None,
            ANTHROPIC_API_KEY=None,
        )
        self.db = Database(self.settings.database)
        self.base = StandInBase()
        self.sandbox = FakeSandbox()
        self.admission = AdmissionQueue(max_turns, per_principal)
        executor = TurnExecutor(
            self.sandbox, TokenRegistry(), self.settings.tools_dir, 0.1, admission=self.admission
        )
        self.runs = RunRegistry(
            self.db, executor, NoPeers(_nothing_to_recover), paused_keep_seconds=keep_seconds
        )
        self.base.runs = self.runs
        bases: dict[str, Any] = {"standin": self.base}
        catalog = ModelCatalog(Upstreams(self.settings))
        blobs = BlobStore(self.settings.blobs_dir)
        environments = assemble_environments(
            self.settings, self.db, NoBuilder(), EgressPolicy(), _no_agent_number
        )
        self.engine = assemble_engine(
            self.settings, self.db, bases, catalog, self.runs, blobs, environments
        )
        self.principal_id = self.db.run(keys.ensure_principal, keys.DEFAULT_PRINCIPAL).id

    async def close(self) -> None:
        for gate in self.base.gates.values():
            gate.set()
        await self.runs.shutdown()
        self.db.close()


async def _no_agent_number(principal_id: str) -> None:
    return None


class NoBuilder:
    """The fake engine builds no environment: every build fails, saying so."""

    async def build(self, request: BuildRequest, progress: BuildProgress) -> BuildResult:
        raise BuildFailed("The fake engine builds no environment.")

    def runtimes(self) -> Runtimes:
        return Runtimes(python=(), node="", os="")
