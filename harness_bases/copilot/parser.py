"""Pure mapping from `copilot --output-format json` events to base-neutral AgentEvents (no I/O).

One parser per turn. What it reads (every line is `{"type", "data", …}`):

- `assistant.message_delta` / `assistant.message`: a response's text, streamed, then whole
  (`messageId` keys the item; the whole message also carries the tool calls it asks for).
- `assistant.reasoning_delta` / `assistant.reasoning`: its thinking (`reasoningId`). The CLI
  sends the whole thinking after the message; here a thinking block closes once text
  follows it.
- `tool.execution_start` / `tool.execution_complete`: a tool call with its arguments, and its
  result (`success`, `result.content`; a shell command's exit code in `shellExecution`).
- `session.error`: a failed model call (`statusCode`, the provider's words in `message`,
  after the status the CLI puts first) or another failure.
- `abort`: the turn was interrupted (SIGINT).
- `assistant.idle`: the prompt is done; `aborted` when it was interrupted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev
from harness_bases.json_lines import EXITED
from harness_bases.messages import PROVIDER_REFUSED, safe_message
from harness_bases.tool_results import tool_result_text

Message = dict[str, Any]

AGENT_FAILED = "The agent failed."
_STATUS_PREFIX = re.compile(r"^\d{3}\s+")
# The CLI appends the shell's bookkeeping to a command's output for the model.
_SHELL_TRAILER = re.compile(r"\n?<shellId: [^>]*>\s*\Z")


@dataclass
class CopilotParser:
    """Feed it every stdout message of the turn; it returns the events."""

    interrupt_requested: bool = False  # set by the turn: the engine already knows
    finished: bool = False  # assistant.idle was seen
    _text: dict[str, str] = field(default_factory=dict)  # open message -> streamed so far
    _reasoning: dict[str, str] = field(default_factory=dict)  # open thinking -> so far
    _closed: set[str] = field(default_factory=set)
    _open_calls: set[str] = field(default_factory=set)
    _error: Message | None = None
    _aborted: bool = False

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        if not isinstance(msg, dict) or self.finished:
            return []
        handler = _HANDLERS.get(str(msg.get("type")))
        data = msg.get("data")
        return handler(self, data if isinstance(data, dict) else {}) if handler else []

    def at_eof(self) -> list[ev.AgentEvent]:
        if self.finished:
            return []
        self.finished = True
        out = self._close_all()
        if self._aborted and self.interrupt_requested:
            return out  # stopped on our SIGINT: its exit follows the abort
        return [*out, ev.TurnFailed(EXITED, "harness_error")]

    # -- text and thinking ----------------------------------------------------------------

    def _message_delta(self, data: Message) -> list[ev.AgentEvent]:
        item = str(data.get("messageId") or "message")
        piece = str(data.get("deltaContent") or "")
        if item in self._closed or not piece:
            return []
        out = self._close_reasoning()
        self._text[item] = self._text.get(item, "") + piece
        return [*out, ev.TextDelta(item, piece)]

    def _message(self, data: Message) -> list[ev.AgentEvent]:
        item = str(data.get("messageId") or "message")
        content = data.get("content")
        if item in self._closed:
            return []
        if not (isinstance(content, str) and content) and item not in self._text:
            return []
        return [*self._close_reasoning(), *self._done(item, content, text=True)]

    def _reasoning_delta(self, data: Message) -> list[ev.AgentEvent]:
        item, piece = (
            str(data.get("reasoningId") or "reasoning"),
            str(data.get("deltaContent") or ""),
        )
        if item in self._closed or not piece:
            return []
        self._reasoning[item] = self._reasoning.get(item, "") + piece
        return [ev.ReasoningDelta(item, piece)]

    def _reasoning_whole(self, data: Message) -> list[ev.AgentEvent]:
        item = str(data.get("reasoningId") or "reasoning")
        if item in self._closed:
            return []
        return self._done(item, data.get("content"), text=False)

    # -- tools ----------------------------------------------------------------------------

    def _tool_start(self, data: Message) -> list[ev.AgentEvent]:
        call = str(data.get("toolCallId") or "")
        if not call or call in self._open_calls:
            return []
        self._open_calls.add(call)
        arguments = json.dumps(data.get("arguments") or {}, ensure_ascii=False)
        return [
            *self._close_all(),
            ev.ToolCallStarted(call, str(data.get("toolName") or "tool"), arguments),
        ]

    def _tool_complete(self, data: Message) -> list[ev.AgentEvent]:
        call = str(data.get("toolCallId") or "")
        if call not in self._open_calls:
            return []
        self._open_calls.discard(call)
        result = data.get("result")
        content = result.get("content") if isinstance(result, dict) else result
        if content is None and isinstance(data.get("error"), dict):
            content = data["error"].get("message")
        output = _SHELL_TRAILER.sub("", tool_result_text(content))
        shell = data.get("shellExecution")
        exit_code = shell.get("exitCode") if isinstance(shell, dict) else None
        ok = bool(data.get("success")) and exit_code in (None, 0)
        return [ev.ToolCallFinished(call, output, ok)]

    # -- outcome --------------------------------------------------------------------------

    def _session_error(self, data: Message) -> list[ev.AgentEvent]:
        self._error = data
        return []

    def _abort(self, data: Message) -> list[ev.AgentEvent]:
        self._aborted = True
        return []

    def _idle(self, data: Message) -> list[ev.AgentEvent]:
        self.finished = True
        out = self._close_all()
        if data.get("aborted") or self._aborted:
            if self.interrupt_requested:
                return out  # cancelled or stopped by the engine, which already knows
            return [*out, ev.TurnFailed("the agent stopped the turn", "harness_error")]
        if self._error is not None:
            return [*out, _failure(self._error)]
        return [*out, ev.TurnFinished()]

    # -- items ----------------------------------------------------------------------------

    def _done(self, item: str, whole: Any, *, text: bool) -> list[ev.AgentEvent]:
        """The end of a text or thinking block; deltas always add up to the whole."""
        streamed = self._text if text else self._reasoning
        so_far = streamed.pop(item, "")
        self._closed.add(item)
        whole = whole if isinstance(whole, str) and whole else so_far
        if not whole:
            return []
        out: list[ev.AgentEvent] = []
        if whole.startswith(so_far) and len(whole) > len(so_far):
            rest = whole[len(so_far) :]
            out.append(ev.TextDelta(item, rest) if text else ev.ReasoningDelta(item, rest))
        elif not whole.startswith(so_far):
            whole = so_far  # what the client already saw stands
        out.append(ev.TextDone(item, whole) if text else ev.ReasoningDone(item, whole))
        return out

    def _close_reasoning(self) -> list[ev.AgentEvent]:
        out: list[ev.AgentEvent] = []
        for item in list(self._reasoning):
            out += self._done(item, None, text=False)
        return out

    def _close_all(self) -> list[ev.AgentEvent]:
        out = self._close_reasoning()
        for item in list(self._text):
            out += self._done(item, None, text=True)
        return out


def _failure(error: Message) -> ev.TurnFailed:
    text = _STATUS_PREFIX.sub("", str(error.get("message") or "")).strip()
    if error.get("statusCode") or error.get("errorType") == "query":
        return ev.TurnFailed(safe_message(text, PROVIDER_REFUSED), "provider_error")
    return ev.TurnFailed(safe_message(text, AGENT_FAILED), "harness_error")


_HANDLERS = {
    "assistant.message_delta": CopilotParser._message_delta,
    "assistant.message": CopilotParser._message,
    "assistant.reasoning_delta": CopilotParser._reasoning_delta,
    "assistant.reasoning": CopilotParser._reasoning_whole,
    "tool.execution_start": CopilotParser._tool_start,
    "tool.execution_complete": CopilotParser._tool_complete,
    "session.error": CopilotParser._session_error,
    "abort": CopilotParser._abort,
    "assistant.idle": CopilotParser._idle,
}
