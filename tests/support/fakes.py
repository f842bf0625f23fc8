"""A FakeBase and a FakeSandbox: the engine's plugin interfaces, in-process and scripted.

The way httpx ships MockTransport: real server code above, a scripted double below. The
FakeSandbox starts a FakeProcess (no bubblewrap, no container); the FakeBase's turns replay a
script of AgentEvents (plus `Hang` and `Pause` steps) and record the TurnSpec they got, so a
test drives the task service, turn executor, runs, budgets and cancellation in milliseconds.

    base = FakeBase()
    base.script("fix the bug", [TextDelta("m", "done"), TextDone("m", "done"), TurnFinished()])
    app = create_app(settings, bases={"fake": base}, sandbox=FakeSandbox())
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness_bases.base import (
    CliPin,
    Enforcement,
    HarnessBase,
    Invocation,
    Process,
    TurnSpec,
)
from harness_bases.events import AgentEvent, TextDelta, TextDone, TurnFinished
from harness_bases.turns import AgentTurn
from uhp_server.gateway.paths import gateway_path
from uhp_server.sandbox.base import Sandbox, SandboxedProcess, SandboxError, SessionMounts
from uhp_server.settings import Settings

AGENT_PROGRAM = "/opt/uhp-tools/fake-agent"  # what FakeBase.prepare starts


@dataclass(frozen=True)
class Hang:
    """The agent goes quiet until it is interrupted (then its stdout ends)."""


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Ask:
    """The agent asks the user (TurnSpec.ask_user) and says the answer it got; with no answer
    (the turn parked or stopped) it goes quiet until it is interrupted, as a CLI does whose
    question tool call is left pending, then its stdout ends."""

    question: str


@dataclass(frozen=True)
class Write:
    """The agent writes a file into its workspace (so the turn has an artifact)."""

    name: str
    content: bytes


Step = AgentEvent | Hang | Pause | Ask | Write


def answer(text: str) -> list[Step]:
    """A turn that answers `text` and completes."""
    return [TextDelta("msg", text), TextDone("msg", text), TurnFinished()]


# -- the sandbox -------------------------------------------------------------------------------
class FakeProcess(SandboxedProcess):
    """A process that runs until it exits (its turn ended) or is killed."""

    def __init__(self, invocation: Invocation, mounts: SessionMounts) -> None:
        self.invocation = invocation
        self.mounts = mounts
        self.written = bytearray()
        self.stdin_closed = False
        self.killed = False
        self.paused = False  # as a local sandbox's frozen cgroup
        self.can_pause = True
        self._exit_code: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def exit(self, code: int = 0) -> None:
        if not self._exit_code.done():
            self._exit_code.set_result(code)

    async def write(self, data: bytes) -> None:
        self.written += data

    async def close_stdin(self) -> None:
        self.stdin_closed = True

    async def lines(self) -> AsyncIterator[bytes]:
        await asyncio.shield(self._exit_code)
        return
        yield b""  # an async generator with no output

    def stderr_tail(self) -> str:
        return ""

    async def wait(self) -> int:
        return await asyncio.shield(self._exit_code)

    async def pause(self) -> bool:
        self.paused = self.can_pause and not self._exit_code.done()
        return self.paused

    async def resume(self) -> None:
        self.paused = False

    async def kill(self) -> None:
        self.killed = True
        self.paused = False
        self.exit(-9)


class FakeSandbox(Sandbox):
    """Starts FakeProcesses. Any program but the fake agent exits 0 at once (like /bin/true);
    set `start_error` to make every start fail as a broken sandbox would."""

    name = "fake"
    keeps_processes_warm = True  # as the local sandbox (tests/test_warm_sessions_fast.py)

    def __init__(self) -> None:
        self.started: list[FakeProcess] = []
        self.start_error: str | None = None
        self.reaped: list[str] = []  # other servers whose leftovers this one was told to reap

    @classmethod
    def from_settings(cls, settings: Settings, bases: Collection[HarnessBase] = ()) -> FakeSandbox:
        return cls()  # handed to the app directly; never chosen by UHP_SANDBOX

    def gateway_url(self, backend: str) -> str:
        return "http://127.0.0.1:9" + gateway_path(backend)  # nothing listens: no calls made

    async def start(self, invocation: Invocation, mounts: SessionMounts) -> SandboxedProcess:
        if self.start_error is not None:
            raise SandboxError(self.start_error)
        proc = FakeProcess(invocation, mounts)
        self.started.append(proc)
        if invocation.argv[:1] != [AGENT_PROGRAM]:
            proc.exit(0)
        return proc

    @property
    def running(self) -> list[FakeProcess]:
        return [p for p in self.started if not p._exit_code.done()]

    async def reap_owner(self, owner: str) -> None:
        self.reaped.append(owner)


# -- the base ----------------------------------------------------------------------------------
class FakeTurn(AgentTurn):
    name = "fake"

    def __init__(self, proc: Process, spec: TurnSpec, steps: Sequence[Step]) -> None:
        super().__init__()
        self.proc = proc
        self.spec = spec
        self.steps = list(steps)
        self.interrupted = asyncio.Event()

    async def run(self) -> AsyncGenerator[AgentEvent, None]:
        try:
            for step in self.steps:
                if isinstance(step, Hang):
                    await self.interrupted.wait()
                    return
                if isinstance(step, Ask):
                    assert self.spec.ask_user is not None, "the door takes no question"
                    reply = await self.spec.ask_user(step.question, ())
                    if reply is None:
                        await self.interrupted.wait()
                        return
                    yield TextDelta("asked", f"answered: {reply}")
                    yield TextDone("asked", f"answered: {reply}")
                elif isinstance(step, Pause):
                    await asyncio.sleep(step.seconds)
                elif isinstance(step, Write):
                    (self.spec.host_workspace / step.name).write_bytes(step.content)
                else:
                    yield step
        finally:
            if isinstance(self.proc, FakeProcess):
                self.proc.exit(0)  # stdout ended: the CLI exits

    async def send_interrupt(self) -> bool:
        self.interrupted.set()
        return True


@dataclass(eq=False)
class FakeBase(HarnessBase):
    """A harness base whose turns replay scripts, chosen by the prompt's first line."""

    name: str = "fake"
    label: str = "Fake"
    backend: str = "openai"
    wire: str = "responses"
    cli_version: str = "1.0.0"
    cli_pins: tuple[CliPin, ...] = ()
    enforcement: Enforcement = field(
        default_factory=lambda: Enforcement(disabled_tools="instruction", max_step="counted")
    )
    state_dirs: tuple[str, ...] = ()
    conversation_paths: tuple[str, ...] = ()
    runtime_packages: tuple[str, ...] = ()
    host_packages: tuple[str, ...] = ()
    default_script: list[Step] = field(default_factory=lambda: answer("ok"))
    scripts: dict[str, list[Step]] = field(default_factory=dict)
    specs: list[TurnSpec] = field(default_factory=list)  # every turn's spec, in order
    turns: list[FakeTurn] = field(default_factory=list)

    def script(self, prompt: str, steps: list[Step]) -> None:
        self.scripts[prompt] = steps

    def install(self, tools_dir: Path) -> None:
        pass

    def installed_version(self, tools_dir: Path) -> str | None:
        return self.cli_version

    def prepare(self, turn: TurnSpec) -> Invocation:
        return Invocation([AGENT_PROGRAM], {}, turn.paths.workspace)

    def start_turn(self, proc: Process, turn: TurnSpec) -> AgentTurn:
        self.specs.append(turn)
        first_line = turn.prompt.strip().splitlines()[0] if turn.prompt.strip() else ""
        agent_turn = FakeTurn(proc, turn, self.scripts.get(first_line, self.default_script))
        self.turns.append(agent_turn)
        return agent_turn
