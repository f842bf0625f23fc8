"""The engine request: what every front door hands the engine, whichever contract it speaks.

A door (UHP /v1, the Oumi harness protocol, a tool endpoint, AgentOS) translates its own
request into an `EngineTask` and calls `Engine.start`; it reads the task back through
`Engine.state` / `Engine.follow` and renders it in its own format. The engine never
knows which door called it.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from uhp_server.gateway.connection import ModelConnection


@dataclass(frozen=True)
class ToolCall:
    """A tool call in a chat conversation; `arguments` is a JSON string."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat conversation (the OpenAI chat format)."""

    role: str  # system | user | assistant | tool
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # tool messages: the call this answers


@dataclass(frozen=True)
class SessionKey:
    """A contract's own session id. One UHP session per (principal, harness, door, id)."""

    door: str  # e.g. "oumi-harness", "mcp", "agentos"
    external_id: str


@dataclass(frozen=True)
class ToolAnswer:
    """The user's answer to a question the agent asked (a pending tool call)."""

    call_id: str
    output: str


@dataclass(frozen=True)
class Question:
    """A question the agent asked the user: the pending tool call and its parsed content."""

    call_id: str
    name: str  # the tool the agent called, e.g. "ask_user"
    arguments: str  # the call's JSON arguments, as the agent sent them
    text: str  # the question itself
    options: tuple[str, ...] = ()


class QuestionMode(enum.StrEnum):
    NONE = "none"  # the question tool is not offered; the CLI's own tool behaves as usual
    PAUSE = "pause"  # the turn waits (input_required) for Engine.answer
    HOLD = "hold"  # the door's callback decides (AgentOS: open a hold, answer `suspended`)
    RECORDED = "recorded"  # answers given up front, used in order (AgentOS experiment runs)


# A HOLD callback: given the question, return the answer to give the agent now, or None to
# leave the turn paused (the door answers its caller and resolves later with `answer`).
QuestionHandler = Callable[[Question], Awaitable[str | None]]


@dataclass(frozen=True)
class QuestionPolicy:
    """What a question from the agent does in this task."""

    mode: QuestionMode = QuestionMode.NONE
    on_question: QuestionHandler | None = field(default=None, repr=False)  # HOLD
    recorded: tuple[str, ...] = ()  # RECORDED: answers in the order questions come

    @property
    def offers_tool(self) -> bool:
        """Whether the agent is given the server's question tool."""
        return self.mode is not QuestionMode.NONE

    @classmethod
    def none(cls) -> QuestionPolicy:
        return cls(QuestionMode.NONE)

    @classmethod
    def pause(cls) -> QuestionPolicy:
        return cls(QuestionMode.PAUSE)

    @classmethod
    def hold(cls, on_question: QuestionHandler) -> QuestionPolicy:
        return cls(QuestionMode.HOLD, on_question=on_question)

    @classmethod
    def recorded_answers(cls, answers: tuple[str, ...]) -> QuestionPolicy:
        return cls(QuestionMode.RECORDED, recorded=tuple(answers))


@dataclass(frozen=True)
class EngineTask:
    """One task for the engine, as a door asks for it.

    `input` is a UHP input (a string or input items). `opening` is the earlier conversation
    of a NEW session: system messages go into the system prompt, the other messages reach the
    agent as a transcript before the final user message (`input`). `session` continues (or
    creates) the UHP session mapped to the door's own session id; `previous_response_id`
    continues a UHP chain instead."""

    principal_id: str
    harness_id: str | None
    input: str | list[dict[str, Any]]
    opening: tuple[ChatMessage, ...] = ()
    session: SessionKey | None = None
    previous_response_id: str | None = None
    model: str | None = None
    model_connection: ModelConnection | None = field(default=None, repr=False)
    questions: QuestionPolicy = field(default_factory=QuestionPolicy)
    timeout_seconds: int | None = None
    max_step: int | None = None
    instructions: str | None = None
    store: bool = True
    metadata: Mapping[str, str] = field(default_factory=dict)
    # The environment the task reads instead of its harness's (`metadata.environment`,
    # Environments §5), where the door's contract can carry one; None: the harness's.
    environment: str | None = None
    # The memory the session this task starts takes as its default (`metadata.memory`,
    # Memories §9): checked against what the harness's agent holds, granting nothing.
    memory: str | None = None
    # UHP-only details of the response object; other doors leave the defaults.
    max_output_tokens: int | None = None
    background: bool = False
    ignored_fields: tuple[str, ...] = ()  # request fields the door received and ignores


class TaskStatus(enum.StrEnum):
    """Where a task stands. The first five are the protocol's; `queued` and `input_required`
    exist only here (a UHP response stays `in_progress` while its turn waits for a slot or for
    the user: the UHP schema has neither)."""

    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    CANCELLED = "cancelled"
    QUEUED = "queued"
    INPUT_REQUIRED = "input_required"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.INCOMPLETE, TaskStatus.CANCELLED}
)
QUEUED = TaskStatus.QUEUED
INPUT_REQUIRED = TaskStatus.INPUT_REQUIRED


class IncompleteReason(enum.StrEnum):
    """Why a task ended `incomplete` (`incomplete_details.reason`): a budget ran out, or its
    agent waits for the user's answer."""

    MAX_STEP = "max_step"
    TIMEOUT_SECONDS = "timeout_seconds"
    INPUT_REQUIRED = "input_required"  # parked: its questions are still pending


@dataclass(frozen=True)
class TaskState:
    """A task as it stands: its engine status, its folded response, its open questions."""

    status: TaskStatus
    response: dict[str, Any]
    questions: tuple[Question, ...] = ()

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def parked(self) -> bool:
        """Waiting for the user's answers with its turn already ended (kept too long, or the
        server restarted): an answer carries it on in a new turn."""
        return self.status is INPUT_REQUIRED and self.response.get("status") != "in_progress"
