"""A turn's output items as the protocol's chat messages (collect_output).

Only what was generated since the latest submission: after the last question the user
answered, or the whole response when the turn began with the submission. The agent's text
becomes assistant messages; its tool use (commands, edits, MCP calls) assistant `tool_calls`
each answered by a `tool` message right after its group; questions still waiting are the
final assistant message's tool_calls. Call ids are derived from the response id, so they are
unique across the whole session even when a CLI reuses its own ids from turn to turn.
"""

from __future__ import annotations

import hashlib
from typing import Any

from uhp_server.engine import QUESTION_TOOL

_NO_OUTPUT = "(no output was reported for this call)"
_NO_TEXT = "(The agent ended its turn without a message.)"


def door_call_id(response_id: str, call_id: str) -> str:
    digest = hashlib.sha256(f"{response_id}\0{call_id}".encode()).hexdigest()[:24]
    return f"call_{digest}"


def since_latest_submission(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items after the last answered question (its answer came with a submission)."""
    start = 0
    asked = {
        i["call_id"] for i in output if i["type"] == "function_call" and i["name"] == QUESTION_TOOL
    }
    for index, item in enumerate(output):
        if item["type"] == "function_call_output" and item["call_id"] in asked:
            start = index + 1
    return output[start:]


def chat_messages(
    response_id: str, output: list[dict[str, Any]], pending: set[str]
) -> list[dict[str, Any]]:
    """The items as chat messages; `pending` are the engine call ids of open questions."""
    items = since_latest_submission(output)
    results = {i["call_id"]: i["output"] for i in output if i["type"] == "function_call_output"}
    messages: list[dict[str, Any]] = []
    group: list[dict[str, Any]] = []
    waiting: list[dict[str, Any]] = []

    def flush() -> None:
        if not group:
            return
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [_call(response_id, c) for c in group],
            }
        )
        for call in group:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": door_call_id(response_id, call["call_id"]),
                    "content": _text_result(results.get(call["call_id"])),
                }
            )
        group.clear()

    for item in items:
        if item["type"] == "function_call":
            (waiting if item["call_id"] in pending else group).append(item)
        elif item["type"] == "message":
            text = "".join(
                p.get("text", "") for p in item.get("content", []) if p.get("type") == "output_text"
            )
            if text:
                flush()
                messages.append({"role": "assistant", "content": text})
    flush()
    if waiting:
        calls = [_call(response_id, c) for c in waiting]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    elif not messages or messages[-1]["role"] != "assistant":
        messages.append({"role": "assistant", "content": _NO_TEXT})
    return messages


def _call(response_id: str, item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": door_call_id(response_id, item["call_id"]),
        "type": "function",
        "function": {"name": item["name"] or "tool", "arguments": item.get("arguments") or "{}"},
    }


def _text_result(output: Any) -> str:
    if output is None:
        return _NO_OUTPUT
    if isinstance(output, str):
        return output or "(empty output)"
    return str(output)
