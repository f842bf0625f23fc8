"""One turn of a harness base run directly (tests/support/direct_process.py), the way the
engine runs it: consume the events until the CLI reports the outcome, then close stdin and
drain until the CLI exits. The base tests and the overhead bench share it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.base import HarnessBase, SandboxPaths, TurnSpec
from harness_bases.plugin_folders import place_plugins
from tests.conftest import PROVIDER_KEY
from tests.support.direct_process import DirectProcess

OUTCOMES = (ev.TurnFinished, ev.TurnFailed, ev.StepBudgetReached)


def direct_spec(
    prompt: str,
    *,
    model: str,
    gateway_url: str,
    home: Path,
    workspace: Path,
    tools: Path,
    **kw: Any,
) -> TurnSpec:
    """A TurnSpec for a run with no sandbox: the "sandbox" paths are the host folders."""
    return TurnSpec(
        prompt=prompt,
        model=model,
        gateway_url=gateway_url,
        gateway_token=PROVIDER_KEY,
        host_workspace=workspace,
        host_home=home,
        host_tools=tools,
        paths=SandboxPaths(str(workspace), str(home), str(tools)),
        **kw,
    )


@dataclass
class DirectTurn:
    events: list[ev.AgentEvent]
    proc: DirectProcess
    started: float  # time.monotonic() before prepare()
    first_text_at: float | None = None
    interrupted_at: float | None = None
    outcome_at: float | None = None  # when the outcome event arrived

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.of(ev.TextDone))

    @property
    def native_id(self) -> str:
        return self.of(ev.NativeSession)[0].id

    @property
    def outcome(self) -> ev.AgentEvent | None:
        return next((e for e in self.events if isinstance(e, OUTCOMES)), None)


async def run_direct_turn(
    base: HarnessBase,
    spec: TurnSpec,
    *,
    timeout: float,
    exit_timeout: float = 10.0,
    interrupt_when: Callable[[DirectTurn], bool] | None = None,
    wrap: list[str] | None = None,
) -> DirectTurn:
    """Run one turn within `timeout` seconds; `interrupt_when(turn)` is asked after every
    event and interrupts the turn (once) the first time it says yes."""
    started = time.monotonic()
    place_plugins(spec)  # the turn's plugins in the home, as the engine places them
    proc = await DirectProcess.start(base.prepare(spec), wrap)
    turn = DirectTurn([], proc, started)
    agent_turn = base.start_turn(proc, spec)
    agen = agent_turn.events()
    try:
        async with asyncio.timeout(timeout):
            async for event in agen:
                turn.events.append(event)
                if isinstance(event, ev.TextDelta) and turn.first_text_at is None:
                    turn.first_text_at = time.monotonic()
                if turn.interrupted_at is None and interrupt_when and interrupt_when(turn):
                    turn.interrupted_at = time.monotonic()
                    assert await agent_turn.interrupt()
                if isinstance(event, OUTCOMES):
                    turn.outcome_at = time.monotonic()
                    break
            await proc.close_stdin()
            async for event in agen:
                turn.events.append(event)  # nothing is expected after the outcome
    finally:
        await agen.aclose()
        await proc.finish(exit_timeout)
    return turn
