"""Pure mapping from Pi's RPC events (`pi --mode rpc`) to base-neutral AgentEvents (no I/O).

One parser per turn. What it reads:

- `message_start` of an assistant message: a new model response (items are keyed by it).
- `message_update`: the response's stream: `text_delta`/`text_end`, `thinking_delta`/
  `thinking_end` (Pi closes a thinking block only when the response ends, after its text has
  streamed, so a thinking block is closed here as soon as text follows it).
- `message_end` of an assistant message: its usage, its `stopReason` and `errorMessage`.
- `tool_execution_start`/`tool_execution_end`: a tool call with its arguments, its result.
- `response`: the answers to `get_state` (the session id) and `prompt` (refused or not).
- `extension_ui_request` `notify`: what the MCP extension reports (a server it could not
  reach), shown as a notice.
- `agent_end`: the prompt is done; the outcome is the last response's `stopReason`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev
from harness_bases.messages import PROVIDER_REFUSED, safe_message
from harness_bases.tool_results import tool_result_text

Message = dict[str, Any]

EXITED = "the agent exited unexpectedly"
PROMPT_REFUSED = "The agent did not accept the prompt."
# The ids of the turn's own commands, whose `response` the parser reads.
STATE_ID = "uhp-state"
PROMPT_ID = "uhp-prompt"
# Pi prefixes a provider's error with its HTTP status ("400 bad request").
_STATUS_PREFIX = re.compile(r"^\d{3}\s+")


@dataclass
class PiParser:
    """Feed it every stdout message of the turn; it returns the events."""

    interrupt_requested: bool = False  # set by the turn: the engine already knows
    finished: bool = False  # agent_end was seen
    _responses: int = 0
    _text: dict[str, str] = field(default_factory=dict)  # open item -> streamed so far
    _reasoning: dict[str, str] = field(default_factory=dict)
    _closed: set[str] = field(default_factory=set)
    _open_calls: set[str] = field(default_factory=set)
    _usage: list[int] = field(default_factory=lambda: [0, 0, 0])  # input, output, cached
    _stop_reason: str | None = None
    _error: str | None = None

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        if not isinstance(msg, dict) or self.finished:
            return []
        handler = _HANDLERS.get(str(msg.get("type")))
        return handler(self, msg) if handler else []

    def at_eof(self) -> list[ev.AgentEvent]:
        """Events for stdout ending before agent_end."""
        if self.finished:
            return []
        self.finished = True
        return [*self._close_all(), ev.TurnFailed(EXITED, "harness_error")]

    # -- answers to the turn's commands ---------------------------------------------------

    def _response(self, msg: Message) -> list[ev.AgentEvent]:
        if msg.get("id") == STATE_ID:
            session = (msg.get("data") or {}).get("sessionId")
            return [ev.NativeSession(session)] if isinstance(session, str) and session else []
        if msg.get("id") == PROMPT_ID and not msg.get("success"):
            self.finished = True
            return [ev.TurnFailed(PROMPT_REFUSED, "harness_error")]
        return []

    def _notification(self, msg: Message) -> list[ev.AgentEvent]:
        if msg.get("method") != "notify" or not isinstance(msg.get("message"), str):
            return []
        return [ev.Notice(msg["message"])]

    # -- model responses ------------------------------------------------------------------

    def _message_start(self, msg: Message) -> list[ev.AgentEvent]:
        if (msg.get("message") or {}).get("role") == "assistant":
            self._responses += 1
        return []

    def _item(self, update: dict[str, Any]) -> str:
        return f"m{self._responses}c{int(update.get('contentIndex') or 0)}"

    def _message_update(self, msg: Message) -> list[ev.AgentEvent]:
        update = msg.get("assistantMessageEvent")
        if not isinstance(update, dict):
            return []
        kind = update.get("type")
        item = self._item(update)
        if item in self._closed:
            return []
        if kind == "text_delta":
            piece = str(update.get("delta") or "")
            out = self._close_reasoning()
            if piece:
                self._text[item] = self._text.get(item, "") + piece
                out.append(ev.TextDelta(item, piece))
            return out
        if kind == "text_end":
            return [*self._close_reasoning(), *self._done(item, update.get("content"), text=True)]
        if kind == "thinking_delta":
            piece = str(update.get("delta") or "")
            if not piece:
                return []
            self._reasoning[item] = self._reasoning.get(item, "") + piece
            return [ev.ReasoningDelta(item, piece)]
        if kind == "thinking_end":
            return self._done(item, update.get("content"), text=False)
        return []

    def _message_end(self, msg: Message) -> list[ev.AgentEvent]:
        message = msg.get("message") or {}
        if message.get("role") != "assistant":
            return []
        usage = message.get("usage") or {}
        if isinstance(usage, dict):
            cached = int(usage.get("cacheRead") or 0)
            fresh = int(usage.get("input") or 0) + int(usage.get("cacheWrite") or 0)
            self._usage[0] += fresh + cached
            self._usage[1] += int(usage.get("output") or 0)
            self._usage[2] += cached
        self._stop_reason = str(message.get("stopReason") or "")
        self._error = message.get("errorMessage") if self._stop_reason == "error" else None
        return self._close_all()

    # -- tools ----------------------------------------------------------------------------

    def _tool_start(self, msg: Message) -> list[ev.AgentEvent]:
        call = str(msg.get("toolCallId") or "")
        if not call or call in self._open_calls:
            return []
        self._open_calls.add(call)
        arguments = json.dumps(msg.get("args") or {}, ensure_ascii=False)
        return [ev.ToolCallStarted(call, str(msg.get("toolName") or "tool"), arguments)]

    def _tool_end(self, msg: Message) -> list[ev.AgentEvent]:
        call = str(msg.get("toolCallId") or "")
        if call not in self._open_calls:
            return []
        self._open_calls.discard(call)
        result = msg.get("result")
        content = result.get("content") if isinstance(result, dict) else result
        return [ev.ToolCallFinished(call, tool_result_text(content), not msg.get("isError"))]

    # -- compaction -----------------------------------------------------------------------

    def _compaction_end(self, msg: Message) -> list[ev.AgentEvent]:
        # A result: the session's history was summarised (aborted or failed ones carry none).
        return [ev.ConversationCompacted()] if isinstance(msg.get("result"), dict) else []

    # -- outcome --------------------------------------------------------------------------

    def _agent_end(self, msg: Message) -> list[ev.AgentEvent]:
        self.finished = True
        out = self._close_all()
        if any(self._usage):
            out.append(ev.Usage(self._usage[0], self._usage[1], self._usage[2]))
        reason = self._stop_reason
        if reason == "error":
            return [*out, _failure(self._error)]
        if reason == "aborted" and self.interrupt_requested:
            return out  # cancelled or stopped by the engine, which already knows
        if reason == "aborted":
            return [*out, ev.TurnFailed("the agent stopped the turn", "harness_error")]
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


def _failure(error: Any) -> ev.TurnFailed:
    """A failed model call: the provider's own words, without the status Pi puts first."""
    text = _STATUS_PREFIX.sub("", str(error or "")).strip()
    return ev.TurnFailed(safe_message(text, PROVIDER_REFUSED), "provider_error")


_HANDLERS = {
    "response": PiParser._response,
    "extension_ui_request": PiParser._notification,
    "message_start": PiParser._message_start,
    "message_update": PiParser._message_update,
    "message_end": PiParser._message_end,
    "tool_execution_start": PiParser._tool_start,
    "tool_execution_end": PiParser._tool_end,
    "agent_end": PiParser._agent_end,
    "compaction_end": PiParser._compaction_end,
}
