"""Anthropic Messages (``POST /v1/messages``), streamed and not."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from .script import Event, Reply, ToolCall, ToolSpec, content_text, split_text, usage
from .sse import pace, sse

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


# Claude Code 2.1 defers MCP tools: it leaves them out of `tools` and names them, one a line, in
# a system text after this sentence, then takes a call by such a name as a model makes it.
_DEFERRED = re.compile(r"deferred tools are now available via ToolSearch[^\n]*\n((?:[\w.-]+\n?)+)")


def parse(body: dict) -> tuple[list[Event], list[ToolSpec]]:
    """Conversation events and offered tools (deferred ones too) of a Messages request."""
    tools = [
        ToolSpec(t.get("name", ""), t.get("input_schema") or {})
        for t in body.get("tools") or []
        if "input_schema" in t
    ]
    offered = {t.name for t in tools}
    tools += [ToolSpec(name) for name in deferred_tools(body) if name not in offered]
    events = []
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and message.get("role") == "user":
                # Each user text block is its own message: Claude Code sends one block per
                # prompt and merges the prompt of a turn that got no answer (a failed one)
                # with the next, which must still be the one that directs the reply.
                events.append(Event("user", block.get("text", "")))
            elif kind == "text":
                texts.append(block.get("text", ""))
            elif kind == "tool_use":
                if texts and message.get("role") == "assistant":
                    events.append(Event("assistant_text", "\n".join(texts)))
                    texts = []
                events.append(Event("tool_call", block.get("name", "")))
            elif kind == "tool_result":
                events.append(Event("tool_result", content_text(block.get("content"))))
        if texts:
            role = "user" if message.get("role") == "user" else "assistant_text"
            events.append(Event(role, "\n".join(texts)))
    return events, tools


def deferred_tools(body: dict) -> list[str]:
    """The tools a request names as deferred (loaded on demand), in its order."""
    texts = [content_text(body.get("system"))]
    texts += [content_text(m.get("content")) for m in body.get("messages") or []]
    names: list[str] = []
    for match in _DEFERRED.finditer("\n".join(texts)):
        names += [n for n in match.group(1).split() if n not in names]
    return names


def error_body(status: int, message: str) -> dict:
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _blocks(reply: Reply) -> list[dict]:
    blocks: list[dict[str, Any]] = []
    if reply.thinking:
        blocks.append({"type": "thinking", "thinking": reply.thinking, "signature": _sig(reply)})
    if reply.tool_calls:
        blocks.extend(
            {
                "type": "tool_use",
                "id": _tool_id(call),
                "name": call.name,
                "input": call.input_object(),
            }
            for call in reply.tool_calls
        )
    else:
        blocks.append({"type": "text", "text": reply.text})
    return blocks


def _sig(reply: Reply) -> str:
    return f"c2NyaXB0ZWQ{reply.tag}"


def _tool_id(call: ToolCall) -> str:
    return "toolu_" + call.call_id.removeprefix("call_")


def _message(reply: Reply, model: str, body_len: int, done: bool) -> dict:
    inp, out, _ = usage(body_len, reply)
    return {
        "id": f"msg_{reply.tag}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(reply) if done else [],
        "stop_reason": ("tool_use" if reply.tool_call else "end_turn") if done else None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": inp,
            "output_tokens": out if done else 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def render(reply: Reply, model: str, body_len: int) -> dict:
    """The non-streamed message object."""
    return _message(reply, model, body_len, done=True)


async def stream(reply: Reply, model: str, body_len: int) -> AsyncIterator[str]:
    """The Messages SSE stream (``event:`` + ``data:`` lines)."""

    def event(kind: str, **fields: object) -> str:
        return sse({"type": kind, **fields}, event=kind)

    yield event("message_start", message=_message(reply, model, body_len, done=False))
    index = 0
    if reply.thinking:
        start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        yield event("content_block_start", index=index, content_block=start)
        for delta in split_text(reply.thinking):
            yield event(
                "content_block_delta",
                index=index,
                delta={"type": "thinking_delta", "thinking": delta},
            )
        signature = {"type": "signature_delta", "signature": _sig(reply)}
        yield event("content_block_delta", index=index, delta=signature)
        yield event("content_block_stop", index=index)
        index += 1
    if reply.tool_calls:
        # Blocks never interleave on this wire: one block starts, streams and stops, then
        # the next; parallel calls are consecutive tool_use blocks of one message.
        for number, call in enumerate(reply.tool_calls):
            if number:
                yield event("content_block_stop", index=index)
                index += 1
            start = {"type": "tool_use", "id": _tool_id(call), "name": call.name, "input": {}}
            yield event("content_block_start", index=index, content_block=start)
            for piece in split_text(call.arguments):
                json_delta = {"type": "input_json_delta", "partial_json": piece}
                yield event("content_block_delta", index=index, delta=json_delta)
    else:
        yield event("content_block_start", index=index, content_block={"type": "text", "text": ""})
        for delta in reply.deltas():
            await pace(reply)
            yield event(
                "content_block_delta", index=index, delta={"type": "text_delta", "text": delta}
            )
    yield event("content_block_stop", index=index)
    done = _message(reply, model, body_len, done=True)
    stop = {"stop_reason": done["stop_reason"], "stop_sequence": None}
    yield event(
        "message_delta", delta=stop, usage={"output_tokens": done["usage"]["output_tokens"]}
    )
    yield event("message_stop")
