"""Where a turn's time goes: the phases of its execution, timed one after another.

The executor marks each phase as it ends; the time since the previous mark is that phase's,
exported as `uhp_turn_phase_seconds{base, phase}` (ops/metrics.py). It is what `bench/
overhead.py` prints beside its ratio, and what an operator reads to see whether the sandbox,
the CLI's start or the recording is what a slow turn waits on. A phase a turn never reached
(stopped before its CLI started, say) is not observed: the next mark covers the gap.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import Protocol


class TurnPhase(StrEnum):
    ADMITTED = "admitted"  # recorded as in progress, the previous turn gone, a slot free
    PREPARED = "prepared"  # the conversation, MCP servers, attachments, the CLI's config files
    BASELINE = "baseline"  # the workspace as the turn found it, the agent's uid, the environment
    SANDBOX = "sandbox"  # the sandbox started with the CLI in it
    FIRST_EVENT = "first_event"  # the CLI's first event (its start, the first model call)
    OUTCOME = "outcome"  # the rest of the agent's work, to its outcome
    COLLECTED = "collected"  # the files it produced, collected
    RECORDED = "recorded"  # the terminal event written
    WOUND_DOWN = "wound_down"  # its process gone, the conversation put back, the slot freed


class PhaseSink(Protocol):
    def turn_phase(self, base: str, phase: str, seconds: float) -> None: ...


class TurnClock:
    def __init__(self, base: str, sink: PhaseSink | None) -> None:
        self.base = base
        self.sink = sink
        self._loop = asyncio.get_running_loop()
        self.started = self._loop.time()
        self._last = self.started

    def mark(self, phase: TurnPhase) -> None:
        now = self._loop.time()
        if self.sink is not None:
            self.sink.turn_phase(self.base, phase.value, now - self._last)
        self._last = now

    def since_start(self) -> float:
        return self._loop.time() - self.started
