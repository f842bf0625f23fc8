"""A live task as the engine holds it: what its turn runs (`TurnPlan`), how it ended
(`Outcome`), and the run itself (`Run`: its log, its builder, the switches that stop it and
what its questions wait on)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.base import HarnessBase, SkillBundle
from uhp_server.catalog import ModelRoute
from uhp_server.engine.builder import ResponseBuilder
from uhp_server.engine.eventlog import EventLog
from uhp_server.engine.inputs import Attachment
from uhp_server.engine.requests import Question, QuestionPolicy
from uhp_server.gateway.mcp_targets import McpTarget

# How a turn ends when its replica no longer runs it (engine/cluster.py): the message both the
# replica that takes it over and the one that lets it go give.
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
    skills: tuple[SkillBundle, ...] = ()  # enabled skills, built-ins included, whole folders
    mcp_servers: tuple[McpTarget, ...] = ()  # enabled MCP servers, credentials resolved
    attachments: tuple[Attachment, ...] = ()  # files the task brings, placed before the run
    # Where the model calls go (provider, its name for the model); None: the provider named
    # like the base's backend, with `model` as is. A per-turn connection's key lives here.
    route: ModelRoute | None = field(default=None, repr=False)
    ask_user: bool = False  # offer the server's question tool (engine/questions.py)


@dataclass
class Outcome:
    status: str  # completed | failed | incomplete | cancelled
    code: str | None = None
    message: str | None = None
    incomplete_details: dict[str, Any] | None = None


@dataclass
class Run:
    """A live task: its log, its builder, and the switch that stops it."""

    response_id: str
    principal_id: str
    session_id: str
    plan: TurnPlan
    log: EventLog
    builder: ResponseBuilder
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    # Set with `stop` when a caller's deadline ended the turn: it ends `incomplete` with these
    # details (the timeout reason), not `cancelled`.
    time_out: dict[str, Any] | None = None
    native_session_id: str | None = None
    cli_usage: ev.Usage | None = None
    # The previous turn of this session, still winding down: this turn starts after it.
    after: Run | None = None
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # its process is gone
    task: asyncio.Task[None] | None = None
    container_id: str = ""  # the session's container: where the turn's artifacts go
    public_base_url: str = ""  # the origin the client used; artifact download_url is on it
    questions: QuestionPolicy = field(default_factory=QuestionPolicy)
    queued: bool = False  # waiting for admission (engine/admission.py)
    asking: list[Question] = field(default_factory=list)  # questions waiting for the user
    answer_waiters: dict[str, asyncio.Future[str]] = field(default_factory=dict)
    recorded_used: int = 0  # RECORDED answers given so far
    parked: list[str] = field(default_factory=list)  # call ids left pending when parked
    park: asyncio.Event = field(default_factory=asyncio.Event)  # kept long enough: end it
    grant: Any = field(default=None, repr=False)  # the turn's gateway grant while it runs
    hidden_calls: set[str] = field(default_factory=set)  # the CLI's own reports of ask_user
    # Set with `stop` when this replica gave the turn up (engine/cluster.py): it ends
    # `failed` here, and nothing more of it is stored.
    abandoned: bool = False

    def stopped_outcome(self) -> Outcome:
        """How a stopped turn ends: `incomplete` when a deadline stopped it, `failed` when its
        replica gave it up, else cancelled."""
        if self.abandoned:
            return Outcome("failed", "harness_error", REPLICA_STOPPED)
        if self.time_out is not None:
            return Outcome("incomplete", incomplete_details=dict(self.time_out))
        return Outcome("cancelled")

    async def record(self, make_events: Callable[[], list[dict[str, Any]]]) -> None:
        """Append what `make_events` builds, unless the outcome is already decided (a cancel
        wrote the terminal event itself): then nothing may follow it."""
        if not self.log.ending:
            await self.log.append(make_events())
