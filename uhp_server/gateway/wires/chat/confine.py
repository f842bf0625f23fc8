"""What a Chat Completions call may not ask of the provider (gateway/confine.py says why)."""

from __future__ import annotations

from typing import Any

from uhp_server.gateway.wires.confining import drop, keep_choice, keep_tools

_CLIENT_TOOLS = {"function", "custom"}


def confine(body: dict[str, Any]) -> None:
    drop(body, ("web_search_options",))
    keep_tools(body, lambda tool: tool.get("type", "function") in _CLIENT_TOOLS)
    keep_choice(body, lambda choice: choice.get("type") in _CLIENT_TOOLS)


def stand_in(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
