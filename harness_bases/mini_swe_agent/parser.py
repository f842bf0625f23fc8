"""Pure mapping from the driver's JSON lines (driver.py) to base-neutral AgentEvents (no I/O).

One parser per turn. The driver reports, in order: `session` (the conversation's id),
`resume_failed` (the one asked for is gone), `text_delta`/`text_done` and
`reasoning_delta`/`reasoning_done` (a model response's text and thinking), `tool_start`/
`tool_end` (a bash command and its output), `usage`, and `end` with a `status`
(`completed`, `interrupted`, `failed`; a failure's `source` is `provider` for a refused
model call, `agent` otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev
from harness_bases.json_lines import EXITED
from harness_bases.messages import PROVIDER_REFUSED, RESUME_FAILED_NOTICE, safe_message

Message = dict[str, Any]

AGENT_FAILED = "The agent failed."


@dataclass
class MiniParser:
    """Feed it every stdout message of the turn; it returns the events."""

    interrupt_requested: bool = False  # set by the turn: the engine already knows
    finished: bool = False  # `end` was seen
    _open_calls: set[str] = field(default_factory=set)
    _open_items: set[str] = field(default_factory=set)

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        if not isinstance(msg, dict) or self.finished:
            return []
        handler = _HANDLERS.get(str(msg.get("type")))
        return handler(self, msg) if handler else []

    def at_eof(self) -> list[ev.AgentEvent]:
        """Events for stdout ending before `end`: the driver died."""
        if self.finished:
            return []
        self.finished = True
        return [ev.TurnFailed(EXITED, "harness_error")]

    def _session(self, msg: Message) -> list[ev.AgentEvent]:
        found = msg.get("id")
        return [ev.NativeSession(found)] if isinstance(found, str) and found else []

    def _resume_failed(self, msg: Message) -> list[ev.AgentEvent]:
        return [ev.Notice(RESUME_FAILED_NOTICE)]

    def _text_delta(self, msg: Message) -> list[ev.AgentEvent]:
        item, piece = str(msg.get("item") or "text"), str(msg.get("delta") or "")
        self._open_items.add(item)
        return [ev.TextDelta(item, piece)] if piece else []

    def _text_done(self, msg: Message) -> list[ev.AgentEvent]:
        item = str(msg.get("item") or "text")
        self._open_items.discard(item)
        return [ev.TextDone(item, str(msg.get("text") or ""))]

    def _reasoning_delta(self, msg: Message) -> list[ev.AgentEvent]:
        item, piece = str(msg.get("item") or "think"), str(msg.get("delta") or "")
        return [ev.ReasoningDelta(item, piece)] if piece else []

    def _reasoning_done(self, msg: Message) -> list[ev.AgentEvent]:
        return [ev.ReasoningDone(str(msg.get("item") or "think"), str(msg.get("text") or ""))]

    def _tool_start(self, msg: Message) -> list[ev.AgentEvent]:
        call = str(msg.get("call") or "")
        if not call or call in self._open_calls:
            return []
        self._open_calls.add(call)
        name = str(msg.get("name") or "bash")
        return [ev.ToolCallStarted(call, name, str(msg.get("arguments") or "{}"))]

    def _tool_end(self, msg: Message) -> list[ev.AgentEvent]:
        call = str(msg.get("call") or "")
        if call not in self._open_calls:
            return []
        self._open_calls.discard(call)
        return [ev.ToolCallFinished(call, str(msg.get("output") or ""), bool(msg.get("ok")))]

    def _usage(self, msg: Message) -> list[ev.AgentEvent]:
        numbers = [int(msg.get(k) or 0) for k in ("input", "output", "cached")]
        return [ev.Usage(*numbers)] if any(numbers) else []

    def _end(self, msg: Message) -> list[ev.AgentEvent]:
        self.finished = True
        status = msg.get("status")
        if status == "completed":
            return [ev.TurnFinished()]
        if status == "interrupted" and self.interrupt_requested:
            return []  # cancelled or stopped by the engine, which already knows
        if status == "interrupted":
            return [ev.TurnFailed("the agent stopped the turn", "harness_error")]
        if msg.get("source") == "provider":
            return [
                ev.TurnFailed(safe_message(msg.get("error"), PROVIDER_REFUSED), "provider_error")
            ]
        return [ev.TurnFailed(safe_message(msg.get("error"), AGENT_FAILED), "harness_error")]


_HANDLERS = {
    "session": MiniParser._session,
    "resume_failed": MiniParser._resume_failed,
    "text_delta": MiniParser._text_delta,
    "text_done": MiniParser._text_done,
    "reasoning_delta": MiniParser._reasoning_delta,
    "reasoning_done": MiniParser._reasoning_done,
    "tool_start": MiniParser._tool_start,
    "tool_end": MiniParser._tool_end,
    "usage": MiniParser._usage,
    "end": MiniParser._end,
}
