"""A Chat Completions answer, streamed or whole, as Anthropic Messages answers: the SSE
events Claude Code parses, and the final message object."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field

from uhp_server.gateway.wires.anthropic.errors import anthropic_error
from uhp_server.gateway.wires.chat.reader import (
    ChatDelta,
    ChatStreamReader,
    ToolCallDelta,
    completion_delta,
    usage_of,
)
from uhp_server.gateway.wires.chat.translated_stream import (
    EARLY_END,
    TranslatedStream,
    arguments_object,
)
from uhp_server.gateway.wires.sse import encode

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
INTERLEAVED = (
    "The model provider sent more arguments for a tool call after other content, which "
    "Anthropic Messages cannot stream; the answer was stopped rather than cut."
)


@dataclass
class _Tool:
    id: str
    name: str | None
    pending: list[str] = field(default_factory=list)  # arguments that came before the name
    block: int | None = None  # content index once started
    closed: bool = False


@dataclass
class MessageBuilder:
    """The message being built; emits each Messages event as its input arrives."""

    id: str = ""
    model: str = ""
    content: list[dict] = field(default_factory=list)
    events: list[bytes] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict | None = None
    error: dict | None = None
    _open: int | None = None  # content index of the open block
    _tools: dict[int, _Tool] = field(default_factory=dict)
    # Deltas are kept as lists per block and joined when it closes: appending to a string
    # would copy the whole text on every delta of a long answer.
    _parts: dict[int, list[str]] = field(default_factory=dict)

    def start(self, chat_id: str | None, model: str | None) -> None:
        self.id = f"msg_{chat_id}" if chat_id else f"msg_{secrets.token_hex(12)}"
        self.model = model or ""
        self._emit("message_start", message=self.message(done=False))

    def apply(self, delta: ChatDelta) -> None:
        if self.error is not None:
            return
        if delta.error is not None:
            self.error = delta.error
            return
        if delta.reasoning:
            self._append("thinking", delta.reasoning)
        if delta.text or delta.refusal:
            self._append("text", delta.text + delta.refusal)
        for call in delta.tool_calls:
            self._tool(call)
        if delta.finish_reason:
            self.finish_reason = delta.finish_reason
        if delta.usage is not None:
            self.usage = delta.usage

    def end(self, stream_done: bool) -> None:
        if self.error is None and not (stream_done or self.finish_reason):
            self.error = {"message": EARLY_END}
        if self.error is not None:
            message = str(self.error.get("message") or EARLY_END)
            self.events.append(encode(anthropic_error(500, message), "error"))
            return
        self._close()
        for tool in self._tools.values():
            if tool.block is None:  # never named: started now, with what arrived
                self._start_tool(tool)
                self._close()
        delta = {"stop_reason": self.stop_reason(), "stop_sequence": None}
        self._emit("message_delta", delta=delta, usage=self._usage())
        self._emit("message_stop")

    def stop_reason(self) -> str:
        return STOP_REASONS.get(self.finish_reason or "stop", "end_turn")

    def message(self, done: bool) -> dict:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.content if done else [],
            "stop_reason": self.stop_reason() if done else None,
            "stop_sequence": None,
            "usage": self._usage() if done else _zero_usage(),
        }

    def _usage(self) -> dict:
        usage = usage_of(self.usage)
        if usage is None:
            return _zero_usage()
        # Anthropic counts cache reads apart from input_tokens; Chat's prompt_tokens holds both.
        return {
            "input_tokens": max(0, usage.prompt - usage.cached),
            "output_tokens": usage.completion,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": usage.cached,
        }

    def _emit(self, kind: str, **fields: object) -> None:
        self.events.append(encode({"type": kind, **fields}, kind))

    def _append(self, kind: str, text: str) -> None:
        key = "thinking" if kind == "thinking" else "text"
        if self._open is None or self.content[self._open]["type"] != kind:
            self._close()
            block = {"type": kind, key: ""}
            if kind == "thinking":
                block["signature"] = ""
            self._begin(block)
        self._parts[self._open].append(text)  # type: ignore[index]
        delta = {"type": f"{kind}_delta", key: text}
        self._emit("content_block_delta", index=self._open, delta=delta)

    def _begin(self, block: dict) -> None:
        self.content.append(block)
        self._open = len(self.content) - 1
        self._parts[self._open] = []
        self._emit("content_block_start", index=self._open, content_block=dict(block))

    def _close(self) -> None:
        if self._open is None:
            return
        block = self.content[self._open]
        joined = "".join(self._parts.pop(self._open))
        if block["type"] == "tool_use":
            block["input"] = arguments_object(joined)
        else:
            block["thinking" if block["type"] == "thinking" else "text"] = joined
        self._emit("content_block_stop", index=self._open)
        self._open = None

    def _tool(self, delta: ToolCallDelta) -> None:
        tool = self._tools.get(delta.index)
        if tool is None:
            tool = _Tool(delta.id or f"toolu_{secrets.token_hex(12)}", delta.name)
            self._tools[delta.index] = tool
        tool.name = tool.name or delta.name
        if tool.block is not None and tool.block != self._open:
            if delta.arguments:  # a fragment for a block already closed
                self.error = {"message": INTERLEAVED}
            return
        if tool.block is None:
            if delta.arguments:
                tool.pending.append(delta.arguments)
            if tool.name and self._open_tool_done():
                self._start_tool(next(t for t in self._tools.values() if t.block is None))
            return
        self._args_delta(tool.block, delta.arguments)

    def _open_tool_done(self) -> bool:
        """Whether another tool block may start: Messages streams one block at a time, and
        Chat may interleave parallel calls' arguments by index. A later call is held back
        (its arguments kept) while the open call's arguments are not yet a whole JSON value;
        whatever is held starts in order once they are, or at the end."""
        if self._open is None or self.content[self._open]["type"] != "tool_use":
            return True
        try:
            json.loads("".join(self._parts[self._open]))
        except ValueError:
            return False
        return True

    def _start_tool(self, tool: _Tool) -> None:
        self._close()
        self._begin({"type": "tool_use", "id": tool.id, "name": tool.name or "", "input": {}})
        tool.block = self._open
        pending, tool.pending = "".join(tool.pending), []
        self._args_delta(tool.block, pending)  # type: ignore[arg-type]

    def _args_delta(self, block: int, fragment: str) -> None:
        if not fragment:
            return
        self._parts[block].append(fragment)
        delta = {"type": "input_json_delta", "partial_json": fragment}
        self._emit("content_block_delta", index=block, delta=delta)


def _zero_usage() -> dict:
    return {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


class AnthropicStream(TranslatedStream[MessageBuilder]):
    """Chat SSE bytes in, Messages SSE bytes out; each delta goes out as it arrives."""

    def __init__(self) -> None:
        super().__init__(MessageBuilder())

    def _begin(self, reader: ChatStreamReader) -> None:
        self._builder.start(reader.id, reader.model)

    def _take(self) -> bytes:
        events, self._builder.events = self._builder.events, []
        return b"".join(events)


def translate_completion(completion: dict) -> dict:
    """A whole `chat.completion` as a Messages message object (errors: `.error` set)."""
    builder = MessageBuilder()
    builder.start(completion.get("id"), completion.get("model"))
    builder.apply(completion_delta(completion))
    builder.end(stream_done=True)
    if builder.error is not None:
        return anthropic_error(500, str(builder.error.get("message") or EARLY_END))
    return builder.message(done=True)
