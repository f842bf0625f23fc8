"""Pure mapping from Claude Code's stream-json output to base-neutral AgentEvents (no I/O).

One parser per turn. What it reads (`claude -p --output-format stream-json --verbose
--include-partial-messages`):

- `system` `init`: the session id (for resume) and the MCP servers' status.
- `stream_event`: the raw Anthropic streaming events of each model response; text and
  thinking deltas come from here, as they arrive.
- `assistant`: one message per finished content block (text, thinking, tool_use), sent
  before that block's `content_block_stop`; the whole text, and the tool call.
- `user`: the tool results.
- `result`: the turn's outcome and usage.

Messages with a `parent_tool_use_id` belong to a sub-agent's own conversation and are left
out, as the reference base leaves out sub-agent threads: the sub-agent shows as one call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev
from harness_bases.claude_code.failures import classify_failure
from harness_bases.tool_results import tool_result_text

Message = dict[str, Any]

EXITED = "the agent exited unexpectedly"
_STREAMED_KINDS = {"text_delta": "text", "thinking_delta": "thinking"}


@dataclass
class ClaudeParser:
    """Feed it every stdout message of the turn; it returns the events."""

    interrupt_requested: bool = False  # set by the driver: the engine already knows
    finished: bool = False  # the turn's `result` was seen
    session_id: str | None = None
    _text: dict[str, str] = field(default_factory=dict)  # item -> streamed so far
    _reasoning: dict[str, str] = field(default_factory=dict)
    _responses: int = 0  # model responses started (message_start) this turn
    _response_of: dict[str, int] = field(default_factory=dict)  # API message id -> response
    _open_blocks: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    _unstreamed: int = 0  # blocks that came without partial messages
    _open_calls: set[str] = field(default_factory=set)
    _api_error_text: str | None = None

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        if not isinstance(msg, dict) or msg.get("parent_tool_use_id"):
            return []
        handler = _HANDLERS.get(str(msg.get("type")))
        return handler(self, msg) if handler else []

    def at_eof(self) -> list[ev.AgentEvent]:
        """Events for stdout ending before the turn's result."""
        if self.finished:
            return []
        self.finished = True
        return [*self._close_open_items(), ev.TurnFailed(EXITED, "harness_error")]

    # -- system ---------------------------------------------------------------------------

    def _system(self, msg: Message) -> list[ev.AgentEvent]:
        if msg.get("subtype") == "compact_boundary":  # `/compact`, or its own auto-compaction
            return [ev.ConversationCompacted()]
        if msg.get("subtype") != "init":
            return []
        out: list[ev.AgentEvent] = []
        session = msg.get("session_id")
        if isinstance(session, str) and session and self.session_id is None:
            self.session_id = session
            out.append(ev.NativeSession(session))
        for server in msg.get("mcp_servers") or []:
            if isinstance(server, dict) and server.get("status") in ("failed", "needs-auth"):
                name = server.get("name")
                out.append(ev.Notice(f"The MCP server {name} could not be started."))
        return out

    # -- streamed deltas ------------------------------------------------------------------

    def _stream_event(self, msg: Message) -> list[ev.AgentEvent]:
        event = msg.get("event") or {}
        kind = event.get("type")
        if kind == "message_start":
            self._responses += 1
            message_id = (event.get("message") or {}).get("id")
            if isinstance(message_id, str):
                self._response_of[message_id] = self._responses
            self._open_blocks[self._responses] = []
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            blocks = self._open_blocks.setdefault(self._responses, [])
            blocks.append((int(event.get("index") or 0), str(block.get("type"))))
        elif kind == "content_block_delta":
            return self._delta(int(event.get("index") or 0), event.get("delta") or {})
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[ev.AgentEvent]:
        kind = _STREAMED_KINDS.get(str(delta.get("type")))
        if kind is None:
            return []
        piece = str(delta.get(kind) or "")
        if not piece:
            return []
        item = f"r{self._responses}b{index}"
        if kind == "text":
            self._text[item] = self._text.get(item, "") + piece
            return [ev.TextDelta(item, piece)]
        self._reasoning[item] = self._reasoning.get(item, "") + piece
        return [ev.ReasoningDelta(item, piece)]

    def _item_for(self, message_id: Any, block_type: str) -> str:
        """The item key of a finished block: the streamed block it completes, or a new key
        when it was not streamed."""
        response = self._response_of.get(message_id) if isinstance(message_id, str) else None
        blocks = self._open_blocks.get(response, []) if response is not None else []
        for position, (index, kind) in enumerate(blocks):
            if kind == block_type:
                del blocks[position]
                return f"r{response}b{index}"
        self._unstreamed += 1
        return f"u{self._unstreamed}"

    # -- whole messages -------------------------------------------------------------------

    def _assistant(self, msg: Message) -> list[ev.AgentEvent]:
        message = msg.get("message") or {}
        blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
        if msg.get("is_api_error_message") or message.get("model") == "<synthetic>":
            # The CLI's own note (a refused model call): part of the outcome, not an answer.
            texts = [str(b.get("text") or "") for b in blocks if b.get("type") == "text"]
            self._api_error_text = "\n".join(t for t in texts if t) or self._api_error_text
            return []
        out: list[ev.AgentEvent] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                item = self._item_for(message.get("id"), "text")
                out += _done(self._text, item, str(block.get("text") or ""), text=True)
            elif kind == "thinking":
                item = self._item_for(message.get("id"), "thinking")
                out += _done(self._reasoning, item, str(block.get("thinking") or ""), text=False)
            elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
                out += self._tool_started(block)
            elif isinstance(kind, str) and kind.endswith("_tool_result"):
                out += self._tool_finished(block)  # server-side tools answer in the message
        return out

    def _user(self, msg: Message) -> list[ev.AgentEvent]:
        content = (msg.get("message") or {}).get("content")
        if not isinstance(content, list):
            return []
        out: list[ev.AgentEvent] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out += self._tool_finished(block)
        return out

    def _tool_started(self, block: dict[str, Any]) -> list[ev.AgentEvent]:
        call = str(block.get("id") or "")
        if not call or call in self._open_calls:
            return []
        self._open_calls.add(call)
        arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
        return [ev.ToolCallStarted(call, str(block.get("name") or "tool"), arguments)]

    def _tool_finished(self, block: dict[str, Any]) -> list[ev.AgentEvent]:
        call = str(block.get("tool_use_id") or "")
        if call not in self._open_calls:
            return []  # not a call this parser saw start (a sub-agent's)
        self._open_calls.discard(call)
        ok = not block.get("is_error") and "error" not in str(block.get("type"))
        return [ev.ToolCallFinished(call, tool_result_text(block.get("content")), ok)]

    # -- outcome --------------------------------------------------------------------------

    def _result(self, msg: Message) -> list[ev.AgentEvent]:
        if self.finished:
            return []
        self.finished = True
        out = [*self._close_open_items(), *_usage(msg.get("usage"))]
        subtype = msg.get("subtype")
        if subtype == "success" and not msg.get("is_error"):
            return [*out, ev.TurnFinished()]
        if subtype == "error_max_turns":
            return [*out, ev.StepBudgetReached()]
        if self.interrupt_requested and subtype == "error_during_execution":
            return out  # cancelled or stopped by the engine, which already knows
        return [*out, classify_failure(msg, self._api_error_text)]

    def _close_open_items(self) -> list[ev.AgentEvent]:
        """TextDone / ReasoningDone for blocks cut off before the CLI sent them whole."""
        out: list[ev.AgentEvent] = []
        for item in list(self._text):
            out += _done(self._text, item, "", text=True)
        for item in list(self._reasoning):
            out += _done(self._reasoning, item, "", text=False)
        return out


def _done(streamed: dict[str, str], item: str, whole: str, text: bool) -> list[ev.AgentEvent]:
    """The end of a text or thinking block; deltas always add up to the whole."""
    so_far = streamed.pop(item, "")
    whole = whole or so_far
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


def _usage(usage: Any) -> list[ev.AgentEvent]:
    """The turn's usage as the CLI summed it; input counts cache reads and writes too, as
    the gateway's count does."""
    if not isinstance(usage, dict):
        return []
    fresh = int(usage.get("input_tokens") or 0)
    cache_read = int(usage.get("cache_read_input_tokens") or 0)
    cache_write = int(usage.get("cache_creation_input_tokens") or 0)
    output = int(usage.get("output_tokens") or 0)
    if not (fresh or cache_read or cache_write or output):
        return []
    return [ev.Usage(fresh + cache_read + cache_write, output, cache_read)]


_HANDLERS = {
    "system": ClaudeParser._system,
    "stream_event": ClaudeParser._stream_event,
    "assistant": ClaudeParser._assistant,
    "user": ClaudeParser._user,
    "result": ClaudeParser._result,
}
