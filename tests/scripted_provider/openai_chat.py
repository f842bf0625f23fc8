"""OpenAI Chat Completions (``POST /v1/chat/completions``), streamed and not.

THINK is sent as ``reasoning_content`` (a field many OpenAI-compatible clients accept).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

from .script import Event, Reply, ToolSpec, content_text, split_text, usage
from .sse import CREATED, pace, sse


def parse(body: dict) -> tuple[list[Event], list[ToolSpec]]:
    """Conversation events and offered tools of a Chat Completions request."""
    tools = [
        ToolSpec(t["function"].get("name", ""), t["function"].get("parameters") or {})
        for t in body.get("tools") or []
        if isinstance(t.get("function"), dict)
    ]
    events: list[Event] = []
    for message in body.get("messages") or []:
        role, content = message.get("role"), message.get("content")
        text = content_text(content)
        if role == "user" and isinstance(content, list):
            # Each text part is its own message, as each user text block is on the Anthropic
            # wire: a client that merges turns into one message keeps their boundaries.
            texts = [p.get("text", "") for p in content if isinstance(p, dict)]
            events.extend(Event("user", t) for t in texts if t)
        elif role == "user":
            events.append(Event("user", text))
        elif role == "assistant":
            if text:
                events.append(Event("assistant_text", text))
            for call in message.get("tool_calls") or []:
                events.append(Event("tool_call", (call.get("function") or {}).get("name", "")))
        elif role in ("tool", "function"):
            events.append(Event("tool_result", text))
    return events, tools


def error_body(message: str, code: str, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _usage(reply: Reply, body_len: int) -> dict:
    inp, out, reasoning = usage(body_len, reply)
    return {
        "prompt_tokens": inp,
        "completion_tokens": out,
        "total_tokens": inp + out,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def _finish(reply: Reply) -> str:
    return "tool_calls" if reply.tool_call else "stop"


def _base(reply: Reply, model: str, obj: str) -> dict:
    return {"id": f"chatcmpl-{reply.tag}", "object": obj, "created": CREATED, "model": model}


def render(reply: Reply, model: str, body_len: int) -> dict:
    """The non-streamed ``chat.completion`` object."""
    message: dict = {"role": "assistant", "content": None if reply.tool_call else reply.text}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    choice = {"index": 0, "message": message, "finish_reason": _finish(reply), "logprobs": None}
    body = _base(reply, model, "chat.completion")
    return {**body, "choices": [choice], "usage": _usage(reply, body_len)}


def _tool_call_deltas(reply: Reply) -> list[dict]:
    """Each call's head (id, name), then the argument fragments of all calls interleaved by
    ``index``, as the API allows: a client must join fragments by index, not by order."""
    deltas = []
    pieces = []
    for index, call in enumerate(reply.tool_calls):
        head = {"index": index, "id": call.call_id, "type": "function"}
        deltas.append({**head, "function": {"name": call.name, "arguments": ""}})
        pieces.append([(index, piece) for piece in split_text(call.arguments)])
    for row in itertools.zip_longest(*pieces):
        for index, piece in (p for p in row if p):
            deltas.append({"index": index, "function": {"arguments": piece}})
    return deltas


async def stream(
    reply: Reply, model: str, body_len: int, include_usage: bool = False
) -> AsyncIterator[str]:
    """The ``chat.completion.chunk`` SSE stream, ending with ``data: [DONE]``."""
    base = _base(reply, model, "chat.completion.chunk")

    def chunk(delta: dict, finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        extra = {"usage": None} if include_usage else {}
        return sse({**base, "choices": [choice], **extra})

    yield chunk({"role": "assistant", "content": ""})
    for delta in split_text(reply.thinking) if reply.thinking else []:
        yield chunk({"reasoning_content": delta})
    if reply.tool_calls:
        for call_delta in _tool_call_deltas(reply):
            yield chunk({"tool_calls": [call_delta]})
    else:
        for delta in reply.deltas():
            await pace(reply)
            yield chunk({"content": delta})
    yield chunk({}, _finish(reply))
    if include_usage:
        yield sse({**base, "choices": [], "usage": _usage(reply, body_len)})
    yield sse("[DONE]")
