"""A Chat Completions answer, streamed or whole, as the Responses API answers: the SSE event
sequence Codex parses, and the final response object."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field

from uhp_server.gateway.wires.chat.reader import (
    ChatDelta,
    ChatStreamReader,
    ToolCallDelta,
    completion_delta,
    usage_of,
)
from uhp_server.gateway.wires.chat.translated_stream import EARLY_END, TranslatedStream
from uhp_server.gateway.wires.responses.request import CUSTOM_INPUT, ToolMap
from uhp_server.gateway.wires.sse import encode

INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}


@dataclass
class _Call:
    output_index: int
    item_id: str
    call_id: str
    name: str | None
    fragments: list[str] = field(default_factory=list)
    opened: bool = False

    @property
    def arguments(self) -> str:
        return "".join(self.fragments)


@dataclass
class ResponseBuilder:
    """The response being built; emits each Responses event as its input arrives."""

    tools: ToolMap
    id: str = ""
    model: str = ""
    created_at: int = 0
    output: list[dict] = field(default_factory=list)
    events: list[bytes] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict | None = None
    error: dict | None = None
    _seq: int = 0
    _reasoning: int | None = None  # output index of the open reasoning item
    _message: int | None = None  # output index of the open message item
    _calls: dict[int, _Call] = field(default_factory=dict)
    # Deltas are kept as lists and joined when their item closes: appending to a string
    # would copy the whole text on every delta of a long answer.
    _texts: dict[int, list[str]] = field(default_factory=dict)

    def start(self, chat_id: str | None, model: str | None, created: int | None) -> None:
        self.id = f"resp_{chat_id}" if chat_id else f"resp_{secrets.token_hex(12)}"
        self.model = model or ""
        self.created_at = created or int(time.time())
        pending = self.response("in_progress")
        self._emit("response.created", response=pending)
        self._emit("response.in_progress", response=pending)

    def apply(self, delta: ChatDelta) -> None:
        if self.error is not None:
            return
        if delta.error is not None:
            self.error = delta.error
            return
        if delta.reasoning:
            self._reason(delta.reasoning)
        if delta.text or delta.refusal:
            self._say(delta.text + delta.refusal)
        for call in delta.tool_calls:
            self._call(call)
        if delta.finish_reason:
            self.finish_reason = delta.finish_reason
        if delta.usage is not None:
            self.usage = delta.usage

    def end(self, stream_done: bool) -> None:
        """The closing events: the open items, then completed, incomplete or failed."""
        if self.error is None and not (stream_done or self.finish_reason):
            self.error = {"message": EARLY_END}
        if self.error is not None:
            self._emit("response.failed", response=self.response("failed"))
            return
        self._close_reasoning()
        self._close_message()
        for index in sorted(self._calls):
            self._close_call(self._calls[index])
        self._calls.clear()
        status = "incomplete" if self.finish_reason in INCOMPLETE_REASONS else "completed"
        self._emit(f"response.{status}", response=self.response(status))

    def response(self, status: str) -> dict:
        done = status != "in_progress"
        reason = INCOMPLETE_REASONS.get(self.finish_reason or "")
        error = None
        if status == "failed" and self.error is not None:
            # Codex reads both as strings; some servers send a numeric code.
            message, code = self.error.get("message"), self.error.get("code")
            error = {"code": str(code or "server_error"), "message": str(message or EARLY_END)}
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": error,
            "incomplete_details": {"reason": reason} if status == "incomplete" else None,
            "model": self.model,
            "output": [item for item in self.output if item] if done else [],
            "usage": self._usage() if done else None,
        }

    def _usage(self) -> dict | None:
        usage = usage_of(self.usage)
        if usage is None:
            return None
        return {
            "input_tokens": usage.prompt,
            "input_tokens_details": {"cached_tokens": usage.cached},
            "output_tokens": usage.completion,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.prompt + usage.completion,
        }

    def _emit(self, kind: str, **fields: object) -> None:
        self.events.append(encode({"type": kind, "sequence_number": self._seq, **fields}, kind))
        self._seq += 1

    def _add_item(self, item: dict) -> int:
        self.output.append(item)
        index = len(self.output) - 1
        self._emit("response.output_item.added", output_index=index, item=dict(item))
        return index

    def _item_id(self, prefix: str) -> str:
        return f"{prefix}_{self.id.removeprefix('resp_')}_{len(self.output)}"

    def _reason(self, text: str) -> None:
        self._close_message()
        if self._reasoning is None:
            item = {"id": self._item_id("rs"), "type": "reasoning", "summary": []}
            self._reasoning = self._add_item(item)
            where = self._where_reasoning()
            self._emit("response.reasoning_summary_part.added", **where, part=_summary(""))
            self.output[self._reasoning]["summary"] = [_summary("")]
            self._texts[self._reasoning] = []
        self._texts[self._reasoning].append(text)
        self._emit("response.reasoning_summary_text.delta", **self._where_reasoning(), delta=text)

    def _where_reasoning(self) -> dict:
        item = self.output[self._reasoning]  # type: ignore[index]
        return {"item_id": item["id"], "output_index": self._reasoning, "summary_index": 0}

    def _close_reasoning(self) -> None:
        if self._reasoning is None:
            return
        where, item = self._where_reasoning(), self.output[self._reasoning]
        text = "".join(self._texts.pop(self._reasoning))
        item["summary"][0]["text"] = text
        self._emit("response.reasoning_summary_text.done", **where, text=text)
        self._emit("response.reasoning_summary_part.done", **where, part=_summary(text))
        self._emit("response.output_item.done", output_index=self._reasoning, item=item)
        self._reasoning = None

    def _say(self, text: str) -> None:
        self._close_reasoning()
        if self._message is None:
            item = {
                "id": self._item_id("msg"),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            self._message = self._add_item(item)
            self._emit("response.content_part.added", **self._where_message(), part=_text(""))
            self.output[self._message]["content"] = [_text("")]
            self._texts[self._message] = []
        self._texts[self._message].append(text)
        self._emit("response.output_text.delta", **self._where_message(), delta=text, logprobs=[])

    def _where_message(self) -> dict:
        item = self.output[self._message]  # type: ignore[index]
        return {"item_id": item["id"], "output_index": self._message, "content_index": 0}

    def _close_message(self) -> None:
        if self._message is None:
            return
        where, item = self._where_message(), self.output[self._message]
        text = "".join(self._texts.pop(self._message))
        item["content"][0]["text"] = text
        self._emit("response.output_text.done", **where, text=text, logprobs=[])
        self._emit("response.content_part.done", **where, part=_text(text))
        item["status"] = "completed"
        self._emit("response.output_item.done", output_index=self._message, item=item)
        self._message = None

    def _call(self, delta: ToolCallDelta) -> None:
        self._close_reasoning()
        self._close_message()
        call = self._calls.get(delta.index)
        if call is None:
            self.output.append({})  # reserves the output index; filled when opened
            index = len(self.output) - 1
            call = _Call(index, self._item_id("fc"), delta.id or "", delta.name)
            self._calls[delta.index] = call
        call.call_id = call.call_id or delta.id or ""
        call.name = call.name or delta.name
        if delta.arguments:
            call.fragments.append(delta.arguments)
        if not call.opened and call.name:
            self._open_call(call)
            if call.fragments and not self.tools.ref(call.name).custom:
                self._args_delta(call, call.arguments)
        elif call.opened and delta.arguments and not self.tools.ref(call.name or "").custom:
            self._args_delta(call, delta.arguments)

    def _open_call(self, call: _Call) -> None:
        call.opened = True
        call.call_id = call.call_id or f"call_{call.item_id}"
        item = self._call_item(call, done=False)
        self.output[call.output_index] = item
        self._emit("response.output_item.added", output_index=call.output_index, item=item)

    def _call_item(self, call: _Call, done: bool) -> dict:
        ref = self.tools.ref(call.name or "")
        status = "completed" if done else "in_progress"
        item: dict = {"id": call.item_id, "status": status, "call_id": call.call_id}
        if ref.custom:
            item.update(type="custom_tool_call", name=ref.name)
            item["input"] = _custom_input(call.arguments) if done else ""
        else:
            item.update(type="function_call", name=ref.name)
            item["arguments"] = call.arguments if done else ""
        if ref.namespace:
            item["namespace"] = ref.namespace
        return item

    def _args_delta(self, call: _Call, fragment: str) -> None:
        where = {"item_id": call.item_id, "output_index": call.output_index}
        self._emit("response.function_call_arguments.delta", **where, delta=fragment)

    def _close_call(self, call: _Call) -> None:
        if not call.opened:
            self._open_call(call)  # a provider that never named the tool: name stays empty
        item = self._call_item(call, done=True)
        self.output[call.output_index] = item
        where = {"item_id": call.item_id, "output_index": call.output_index}
        if item["type"] == "custom_tool_call":
            self._emit("response.custom_tool_call_input.delta", **where, delta=item["input"])
            self._emit("response.custom_tool_call_input.done", **where, input=item["input"])
        else:
            done = {"name": item["name"], "arguments": item["arguments"]}
            self._emit("response.function_call_arguments.done", **where, **done)
        self._emit("response.output_item.done", output_index=call.output_index, item=item)


def _summary(text: str) -> dict:
    return {"type": "summary_text", "text": text}


def _text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _custom_input(arguments: str) -> str:
    """A freeform tool's raw input back out of the one-string-parameter function call."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(CUSTOM_INPUT), str):
        return value[CUSTOM_INPUT]
    return arguments


class ResponsesStream(TranslatedStream[ResponseBuilder]):
    """Chat SSE bytes in, Responses SSE bytes out; each delta goes out as it arrives."""

    def __init__(self, tools: ToolMap) -> None:
        super().__init__(ResponseBuilder(tools))

    def _begin(self, reader: ChatStreamReader) -> None:
        self._builder.start(reader.id, reader.model, reader.created)

    def _take(self) -> bytes:
        events, self._builder.events = self._builder.events, []
        return b"".join(events)


def translate_completion(completion: dict, tools: ToolMap) -> dict:
    """A whole `chat.completion` as a Responses response object."""
    builder = ResponseBuilder(tools)
    builder.start(completion.get("id"), completion.get("model"), completion.get("created"))
    delta = completion_delta(completion)
    builder.apply(delta)
    builder.end(stream_done=True)
    status = builder.error is not None and "failed"
    if not status:
        status = "incomplete" if builder.finish_reason in INCOMPLETE_REASONS else "completed"
    return builder.response(status)
