"""The base-neutral vocabulary a harness base speaks to the engine.

A base's driver turns its CLI's own output into these events; the engine's translator turns
them into UHP output items and sequence-numbered stream events. Keys (`item`, `call`) are the
base's own identifiers and only need to be unique within one turn.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NativeSession:
    """The CLI's own conversation id, stored on the session so the next turn can resume it."""

    id: str


@dataclass(frozen=True)
class TextDelta:
    item: str
    delta: str


@dataclass(frozen=True)
class TextDone:
    """The assistant message `item` is complete; `text` is its whole text."""

    item: str
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    item: str
    delta: str


@dataclass(frozen=True)
class ReasoningDone:
    item: str
    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    """The agent invoked a tool. `arguments` is a JSON string."""

    call: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCallFinished:
    call: str
    output: str
    ok: bool = True


@dataclass(frozen=True)
class Usage:
    """Token usage as the CLI itself reports it (the gateway's own count is preferred)."""

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0


@dataclass(frozen=True)
class Notice:
    """Something the user should see that is not the agent's answer (a degraded MCP server,
    a transcript that could not be resumed). Rendered as a visible message item."""

    text: str


@dataclass(frozen=True)
class ConversationCompacted:
    """The CLI compacted its conversation (summarised its history to fit its context): what
    the session's instructions placed may be gone from what the model sees, so the engine
    primes the session's next turn afresh (Memories §9.1). Not shown to the user."""


@dataclass(frozen=True)
class TurnFinished:
    """The CLI reported that the turn completed normally."""


@dataclass(frozen=True)
class StepBudgetReached:
    """The CLI stopped itself at its native step limit (TurnSpec.max_step): `incomplete`."""


@dataclass(frozen=True)
class TurnFailed:
    """The CLI reported a failure. `code` is a UHP execution code: `harness_error` or
    `provider_error`."""

    message: str
    code: str = "harness_error"


AgentEvent = (
    NativeSession
    | TextDelta
    | TextDone
    | ReasoningDelta
    | ReasoningDone
    | ToolCallStarted
    | ToolCallFinished
    | Usage
    | Notice
    | ConversationCompacted
    | TurnFinished
    | StepBudgetReached
    | TurnFailed
)
