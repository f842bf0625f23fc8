"""A live task as the engine holds it: what its turn runs (`TurnPlan`), how it ended
(`Outcome`), and the run itself (`Run`: its log, its builder, where its turn is in its life,
what stops it and what its questions wait on).

A run's life is a small state machine, every transition made here (`Run.enter`):

    accepted ──▶ queued ──▶ running ──▶ ending ──▶ ended
        │            │                     ▲
        └────────────┴─────────────────────┘   (stopped or failed before it ran)

`queued`: waiting for a turn slot (engine/turns/admission.py); `running`: its turn is prepared and
its CLI runs (asking the user is a moment of it); `ending`: its outcome is known, its end is
being recorded and its process wound down; `ended`: its process is gone. The phase is the
turn's own progress: the log says what is recorded, and a cancel may record the end before
the turn has seen it.

What stops a run is asked for with `request_stop`; the strongest request so far decides how
it ends (`StopReason`).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.base import HarnessBase, PluginPackage, SkillBundle
from uhp_server.catalog import ModelRoute
from uhp_server.engine.requests import IncompleteReason, Question, QuestionPolicy, TaskStatus
from uhp_server.engine.tasks.inputs import Attachment
from uhp_server.engine.turns.builder import ResponseBuilder
from uhp_server.engine.turns.eventlog import EventLog
from uhp_server.environments.mount import EnvironmentMount
from uhp_server.gateway.mcp_targets import McpTarget

# The reason a parked turn ended `incomplete`: its questions wait for the user's answers.
PARKED_REASON = IncompleteReason.INPUT_REQUIRED
# How a turn ends when its replica no longer runs it (engine/replicas/cluster.py): the message both
# the replica that takes it over and the one that lets it go give.
REPLICA_STOPPED = "The server replica running this task stopped."


@dataclass(frozen=True)
class TurnPlan:
    """What a turn runs, decided when the task was accepted."""

    base: HarnessBase
    prompt: str
    model: str
    system_prompt: str
    disabled_tools: tuple[str, ...]
    max_step: int | None
    timeout_seconds: int
    max_output_tokens: int | None
    native_session_id: str | None
    workspace: Path
    home: Path
    skills: tuple[SkillBundle, ...] = ()  # enabled skills, built-ins and plugins' included
    mcp_servers: tuple[McpTarget, ...] = ()  # enabled MCP servers, credentials resolved
    plugins: tuple[PluginPackage, ...] = ()  # enabled plugins, each its whole package
    attachments: tuple[Attachment, ...] = ()  # files the task brings, placed before the run
    # Where the model calls go (provider, its name for the model); None: the provider named
    # like the base's backend, with `model` as is. A per-turn connection's key lives here.
    route: ModelRoute | None = field(default=None, repr=False)
    ask_user: bool = False  # offer the server's question tool (engine/turns/questions.py)
    # False for a `store: false` task: the CLI's conversation files go back to what they were
    # once it ends (engine/turns/unkept.py).
    store: bool = True
    # The environment version the turn mounts read-only, with its variables and instructions
    # (Environments §6); None: none.
    environment: EnvironmentMount | None = None
    # What its agent holds of memories (Memories §9: engine/facade/agent_memories.TurnMemory):
    # the memory tools are offered and the turn observed; None: no memory.
    memory: Any = None
    # Its harness's `uhpserver_keepWarmSeconds` (0: off) and a digest of that harness's
    # configuration: a process kept warm goes on only with the same (engine/turns/warm.py).
    keep_warm_seconds: int = 0
    harness_revision: str = ""


@dataclass
class Outcome:
    status: TaskStatus  # one of the terminal ones
    code: str | None = None
    message: str | None = None
    incomplete_details: dict[str, Any] | None = None


class RunPhase(enum.StrEnum):
    ACCEPTED = "accepted"  # registered; its turn has not started yet
    QUEUED = "queued"  # waiting for a turn slot
    RUNNING = "running"  # its turn is prepared, then its CLI runs
    ENDING = "ending"  # its outcome is known: its end is recorded, its process wound down
    ENDED = "ended"  # its process is gone


_NEXT: dict[RunPhase, frozenset[RunPhase]] = {
    RunPhase.ACCEPTED: frozenset({RunPhase.QUEUED, RunPhase.RUNNING, RunPhase.ENDING}),
    RunPhase.QUEUED: frozenset({RunPhase.RUNNING, RunPhase.ENDING}),
    RunPhase.RUNNING: frozenset({RunPhase.ENDING}),
    RunPhase.ENDING: frozenset({RunPhase.ENDED}),
    RunPhase.ENDED: frozenset(),
}


class StopReason(enum.IntEnum):
    """Why a run is stopped before its CLI ends it; the greater wins when several came before
    the turn saw one (as it sees them all at once)."""

    PARK = 1  # its question went unanswered while it was kept: `incomplete`, still pending
    CANCEL = 2  # a caller's cancel: `cancelled`
    TIME_OUT = 3  # a caller's deadline, before the turn's own: `incomplete`, with the reason
    ABANDON = 4  # its replica no longer owns it (engine/replicas/): `failed` here, unstored


class WrongTransition(RuntimeError):
    """A run was moved from a phase to one that cannot follow it: a bug in the engine."""


@dataclass
class Run:
    """A live task: its log, its builder, where its turn is, and what stops it."""

    response_id: str
    principal_id: str
    session_id: str
    plan: TurnPlan
    log: EventLog
    builder: ResponseBuilder
    container_id: str = ""  # the session's container: where the turn's artifacts go
    public_base_url: str = ""  # the origin the client used; artifact download_url is on it
    questions: QuestionPolicy = field(default_factory=QuestionPolicy)
    # Set by `request_stop` only; waited on by whatever a stop must interrupt.
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # set on entering `ended`
    native_session_id: str | None = None
    # A `store: false` task's: the CLI conversation it started from, the session's again once
    # the task ends (set when its conversation files are set aside).
    conversation_start: str | None = None
    cli_usage: ev.Usage | None = None
    compacted: bool = False  # the CLI compacted its conversation this turn (Memories §9.1)
    # The previous turn of this session, still winding down: this turn starts after it.
    after: Run | None = None
    task: asyncio.Task[None] | None = None
    grant: Any = field(default=None, repr=False)  # the turn's gateway grant while it runs
    # What its questions wait on (engine/turns/questions.py).
    asking: list[Question] = field(default_factory=list)  # questions waiting for the user
    answer_waiters: dict[str, asyncio.Future[str]] = field(default_factory=dict)
    recorded_used: int = 0  # RECORDED answers given so far
    parked: list[str] = field(default_factory=list)  # call ids left pending when parked
    hidden_calls: set[str] = field(default_factory=set)  # the CLI's own reports of ask_user
    _phase: RunPhase = RunPhase.ACCEPTED
    _stop_reason: StopReason | None = None
    _stop_details: dict[str, Any] | None = None  # a deadline's (TIME_OUT)

    # -- its life --------------------------------------------------------------------------
    @property
    def phase(self) -> RunPhase:
        return self._phase

    def enter(self, phase: RunPhase) -> None:
        """Move to `phase`, which must be able to follow the current one."""
        if phase not in _NEXT[self._phase]:
            raise WrongTransition(f"{self.response_id}: {self._phase} cannot become {phase}")
        self._phase = phase
        if phase is RunPhase.ENDED:
            self.stopped.set()

    @property
    def queued(self) -> bool:
        """Waiting for a turn slot (engine/turns/admission.py)."""
        return self._phase is RunPhase.QUEUED

    # -- stopping it -----------------------------------------------------------------------
    def request_stop(self, reason: StopReason, details: dict[str, Any] | None = None) -> None:
        """Ask the turn to stop for `reason` (with a deadline's `details`); a weaker request
        than one already made changes nothing."""
        if self._stop_reason is None or reason > self._stop_reason:
            self._stop_reason = reason
            self._stop_details = details
        self.stop.set()

    def park(self) -> None:
        """End the turn waiting for the user now, its questions left pending (an answer
        starts a new turn that carries the task on)."""
        if not self.parked:
            self.parked = [question.call_id for question in self.asking]
        self.request_stop(StopReason.PARK)

    @property
    def stop_reason(self) -> StopReason | None:
        return self._stop_reason

    @property
    def cut_short(self) -> bool:
        """Stopped by a caller or by its replica letting go (not parked): its end must be
        recorded at once, whatever is left undone."""
        return self._stop_reason is not None and self._stop_reason > StopReason.PARK

    @property
    def parking(self) -> bool:
        """Parked: its question went unanswered while it was kept, and nothing stronger
        stopped it."""
        return self._stop_reason is StopReason.PARK

    @property
    def abandoned(self) -> bool:
        """Its replica gave it up: it ends `failed` here, and nothing more of it is stored."""
        return self._stop_reason is StopReason.ABANDON

    @property
    def keeps_conversation(self) -> bool:
        """Whether the CLI's conversation as this turn leaves it stays: a kept task's, or a
        `store: false` one's whose turn parked on a question (its answer goes on with it)."""
        return self.plan.store or (bool(self.parked) and not self.cut_short)

    def native_id_to_keep(self) -> str | None:
        """The CLI conversation the session goes on with once this turn ends."""
        if self.keeps_conversation:
            return self.native_session_id or None
        return self.conversation_start

    def stopped_outcome(self) -> Outcome:
        """How a stopped turn ends, by the strongest reason it was stopped for."""
        match self._stop_reason:
            case StopReason.ABANDON:
                return Outcome(TaskStatus.FAILED, "harness_error", REPLICA_STOPPED)
            case StopReason.TIME_OUT:
                return Outcome(
                    TaskStatus.INCOMPLETE, incomplete_details=dict(self._stop_details or {})
                )
            case StopReason.PARK:
                parked = {"reason": PARKED_REASON, "pending_call_ids": list(self.parked)}
                return Outcome(TaskStatus.INCOMPLETE, incomplete_details=parked)
            case _:
                return Outcome(TaskStatus.CANCELLED)

    async def record(self, make_events: Callable[[], list[dict[str, Any]]]) -> None:
        """Append what `make_events` builds, unless the outcome is already decided (a cancel
        wrote the terminal event itself): then nothing may follow it."""
        if not self.log.ending:
            await self.log.append(make_events())
