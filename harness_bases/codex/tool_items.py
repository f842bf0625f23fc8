"""Codex's tool-like thread items as ToolCallStarted / ToolCallFinished events (pure).

Names follow what the agent used: `shell` for commands, `apply_patch` for file edits,
`<server>.<tool>` for MCP tools; arguments are a JSON string.
"""

from __future__ import annotations

import json
from typing import Any

from harness_bases import events as ev


def tool_call_started(item: dict[str, Any]) -> ev.ToolCallStarted | None:
    kind, call = item.get("type"), str(item.get("id"))
    if kind == "commandExecution":
        return ev.ToolCallStarted(call, "shell", _json({"command": item.get("command", "")}))
    if kind == "fileChange":
        changes = [_change(c) for c in item.get("changes") or []]
        return ev.ToolCallStarted(call, "apply_patch", _json({"changes": changes}))
    if kind == "mcpToolCall":
        name = f"{item.get('server')}.{item.get('tool')}"
        return ev.ToolCallStarted(call, name, _json(item.get("arguments")))
    if kind == "dynamicToolCall":
        namespace = item.get("namespace")
        tool = str(item.get("tool"))
        name = f"{namespace}.{tool}" if namespace else tool
        return ev.ToolCallStarted(call, name, _json(item.get("arguments")))
    if kind == "webSearch":
        return ev.ToolCallStarted(call, "web_search", _json({"query": item.get("query", "")}))
    if kind == "imageView":
        return ev.ToolCallStarted(call, "view_image", _json({"path": item.get("path", "")}))
    if kind == "collabAgentToolCall":
        arguments = {"prompt": item.get("prompt"), "receivers": item.get("receiverThreadIds")}
        return ev.ToolCallStarted(call, f"agents.{item.get('tool')}", _json(arguments))
    return None


def tool_call_finished(item: dict[str, Any]) -> ev.ToolCallFinished | None:
    kind, call, status = item.get("type"), str(item.get("id")), item.get("status")
    if kind == "commandExecution":
        output = str(item.get("aggregatedOutput") or "")
        ok = status == "completed" and item.get("exitCode") == 0
        return ev.ToolCallFinished(call, output, ok)
    if kind == "fileChange":
        lines = [f"{c['kind']}: {c['path']}" for c in map(_change, item.get("changes") or [])]
        return ev.ToolCallFinished(call, "\n".join(lines), status == "completed")
    if kind == "mcpToolCall":
        error = item.get("error")
        if error:
            return ev.ToolCallFinished(call, str(error.get("message", "")), False)
        output = _content_text((item.get("result") or {}).get("content"))
        return ev.ToolCallFinished(call, output, status == "completed")
    if kind == "dynamicToolCall":
        output = _content_text(item.get("contentItems"))
        return ev.ToolCallFinished(call, output, bool(item.get("success")))
    if kind in ("webSearch", "imageView"):
        return ev.ToolCallFinished(call, "", True)
    if kind == "collabAgentToolCall":
        return ev.ToolCallFinished(call, _json(item.get("agentsStates")), status == "completed")
    return None


def _change(change: dict[str, Any]) -> dict[str, Any]:
    kind = change.get("kind")
    kind_name = kind.get("type") if isinstance(kind, dict) else kind
    return {"path": change.get("path"), "kind": kind_name, "diff": change.get("diff", "")}


def _content_text(content: Any) -> str:
    """Text of MCP / dynamic tool content parts; other parts as JSON."""
    if not isinstance(content, list):
        return "" if content is None else _json(content)
    parts = []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            parts.append(_json(part))
    return "\n".join(parts)


def _json(value: Any) -> str:
    return json.dumps({} if value is None else value, ensure_ascii=False)
