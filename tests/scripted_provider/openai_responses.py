"""OpenAI Responses API (``POST /v1/responses``), streamed and not.

What Codex CLI 0.169.0 sends (recorded from a real ``codex exec``): one streamed
``POST /v1/responses`` per model turn with the whole history in ``input`` (``store``
false, no ``previous_response_id``), ``Authorization: Bearer <key>``, ``accept:
text/event-stream``, ``originator: codex_exec``, ``session-id``/``thread-id`` headers
and ``x-codex-*`` metadata headers. Its shell tool is ``{"type": "function", "name":
"exec_command", "parameters": {"properties": {"cmd": str, "workdir": str, ...},
"required": ["cmd"]}}``, so a RUN step becomes ``exec_command`` with ``{"cmd": ...}``.
Tool results come back as ``function_call_output`` items whose ``output`` is text
with a header (``Chunk ID``, ``Wall time``, ``Process exited with code 0``, ...)
ending in an ``Output:`` line. Other tools: ``write_stdin``, ``view_image``, goal
tools, ``web_search``, and ``{"type": "namespace", "tools": [...]}`` groups (e.g.
``multi_agent_v1``, and one per MCP server).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

from .script import Event, Reply, ToolCall, ToolSpec, content_text, split_text, usage
from .sse import CREATED, pace, sse


def parse(body: dict) -> tuple[list[Event], list[ToolSpec]]:
    """Conversation events and offered tools of a Responses request."""
    tools: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        kind = tool.get("type")
        if kind == "function":
            tools.append(ToolSpec(tool.get("name", ""), tool.get("parameters") or {}))
        elif kind == "custom":
            tools.append(ToolSpec(tool.get("name", ""), {}, kind="custom"))
        elif kind == "namespace":
            for inner in tool.get("tools") or []:
                schema = inner.get("parameters") or {}
                tools.append(ToolSpec(inner.get("name", ""), schema, namespace=tool.get("name")))
    items = body.get("input")
    if isinstance(items, str):
        return [Event("user", items)], tools
    events = []
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            events.append(Event("user", content_text(item.get("content"))))
        elif kind == "message" and item.get("role") == "assistant":
            events.append(Event("assistant_text", content_text(item.get("content"))))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            events.append(Event("tool_call", item.get("name", "")))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            events.append(Event("tool_result", content_text(item.get("output"))))
    return events, tools


def error_body(message: str, code: str, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _ids(reply: Reply) -> dict[str, str]:
    return {k: f"{k}_{reply.tag}" for k in ("resp", "rs", "msg")}


def _reasoning_item(reply: Reply, done: bool) -> dict:
    summary = [{"type": "summary_text", "text": reply.thinking}] if done else []
    return {"id": _ids(reply)["rs"], "type": "reasoning", "summary": summary}


def _message_item(reply: Reply, done: bool) -> dict:
    content = [_text_part(reply.text)] if done else []
    status = "completed" if done else "in_progress"
    item = {"id": _ids(reply)["msg"], "type": "message", "status": status, "role": "assistant"}
    return {**item, "content": content}


def _text_part(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _call_item(call: ToolCall, done: bool) -> dict:
    status = "completed" if done else "in_progress"
    suffix = call.call_id.removeprefix("call_")
    if call.kind == "custom":
        item = {"id": f"ctc_{suffix}", "type": "custom_tool_call", "status": status}
        return {**item, "call_id": call.call_id, "name": call.name, "input": ""}
    item = {"id": f"fc_{suffix}", "type": "function_call", "status": status}
    item.update(call_id=call.call_id, name=call.name, arguments=call.arguments if done else "")
    if call.namespace:
        item["namespace"] = call.namespace
    return item


def _done_call_item(call: ToolCall) -> dict:
    item = _call_item(call, True)
    if call.kind == "custom":
        item["input"] = call.arguments
    return item


def _outputs(reply: Reply) -> list[dict]:
    items = [_reasoning_item(reply, True)] if reply.thinking else []
    if reply.tool_calls:
        return [*items, *(_done_call_item(call) for call in reply.tool_calls)]
    return [*items, _message_item(reply, True)]


def _response(reply: Reply, model: str, body_len: int, done: bool) -> dict:
    inp, out, reasoning = usage(body_len, reply)
    return {
        "id": _ids(reply)["resp"],
        "object": "response",
        "created_at": CREATED,
        "status": "completed" if done else "in_progress",
        "model": model,
        "output": _outputs(reply) if done else [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "store": False,
        "usage": {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": inp + out,
        }
        if done
        else None,
    }


def render(reply: Reply, model: str, body_len: int) -> dict:
    """The non-streamed response object."""
    return _response(reply, model, body_len, done=True)


def _call_events(calls: list[ToolCall], first: int) -> list[tuple[str, dict]]:
    """Every call's item added, then their argument deltas interleaved (each names its
    ``item_id`` and ``output_index``), then each call's done events, in output order."""
    events: list[tuple[str, dict]] = []
    wheres, pieces = [], []
    for index, call in enumerate(calls, start=first):
        item = _call_item(call, False)
        events.append(("response.output_item.added", {"output_index": index, "item": item}))
        where = {"item_id": item["id"], "output_index": index}
        prefix = "custom_tool_call_input" if call.kind == "custom" else "function_call_arguments"
        wheres.append((where, prefix))
        pieces.append([(where, prefix, piece) for piece in split_text(call.arguments)])
    for row in itertools.zip_longest(*pieces):
        for where, prefix, piece in (p for p in row if p):
            events.append((f"response.{prefix}.delta", {**where, "delta": piece}))
    for call, (where, prefix) in zip(calls, wheres, strict=True):
        if call.kind == "custom":
            events.append((f"response.{prefix}.done", {**where, "input": call.arguments}))
        else:
            done = {**where, "name": call.name, "arguments": call.arguments}
            events.append((f"response.{prefix}.done", done))
        item = {"output_index": where["output_index"], "item": _done_call_item(call)}
        events.append(("response.output_item.done", item))
    return events


async def stream(reply: Reply, model: str, body_len: int) -> AsyncIterator[str]:
    """The SSE event sequence of a streamed response."""
    counter = itertools.count()

    def event(kind: str, **fields: object) -> str:
        return sse({"type": kind, "sequence_number": next(counter), **fields}, event=kind)

    pending = _response(reply, model, body_len, done=False)
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    index = 0
    if reply.thinking:
        item_id, text = _ids(reply)["rs"], reply.thinking
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        yield event(
            "response.output_item.added", output_index=index, item=_reasoning_item(reply, False)
        )
        part = {"type": "summary_text", "text": ""}
        yield event("response.reasoning_summary_part.added", **where, part=part)
        for delta in split_text(text):
            yield event("response.reasoning_summary_text.delta", **where, delta=delta)
        yield event("response.reasoning_summary_text.done", **where, text=text)
        yield event("response.reasoning_summary_part.done", **where, part={**part, "text": text})
        yield event(
            "response.output_item.done", output_index=index, item=_reasoning_item(reply, True)
        )
        index += 1
    if reply.tool_calls:
        for name, fields in _call_events(reply.tool_calls, index):
            yield event(name, **fields)
    else:
        item_id = _ids(reply)["msg"]
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        yield event(
            "response.output_item.added", output_index=index, item=_message_item(reply, False)
        )
        yield event("response.content_part.added", **where, part=_text_part(""))
        for delta in reply.deltas():
            await pace(reply)
            yield event("response.output_text.delta", **where, delta=delta, logprobs=[])
        yield event("response.output_text.done", **where, text=reply.text, logprobs=[])
        yield event("response.content_part.done", **where, part=_text_part(reply.text))
        yield event("response.output_item.done", output_index=index, item=_outputs(reply)[-1])
    yield event("response.completed", response=_response(reply, model, body_len, done=True))
