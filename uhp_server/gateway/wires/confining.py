"""What the wires' confine rules share (gateway/confine.py says why a model call is confined):
dropping fields, and keeping only the tools the agent runs itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ToolTest = Callable[[dict[str, Any]], bool]  # whether the client runs this tool itself


def drop(body: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        body.pop(key, None)


def keep_tools(body: dict[str, Any], client_run: ToolTest) -> list[dict[str, Any]]:
    """Keep the tools the client runs; the kept ones."""
    tools = body.get("tools")
    kept = (
        [t for t in tools if isinstance(t, dict) and client_run(t)]
        if isinstance(tools, list)
        else []
    )
    if kept:
        body["tools"] = kept
    elif "tools" in body:  # none left, or not a list at all
        body.pop("tools")
        body.pop("tool_choice", None)  # a choice among no tools is refused upstream
    return kept


def keep_choice(body: dict[str, Any], client_run: ToolTest) -> None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and not client_run(choice):
        body.pop("tool_choice")  # e.g. {"type": "web_search"}: a hosted tool, now gone
