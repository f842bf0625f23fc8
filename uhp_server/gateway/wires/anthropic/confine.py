"""What an Anthropic Messages call may not ask of the provider (gateway/confine.py says why)."""

from __future__ import annotations

from typing import Any

from uhp_server.gateway.wires.confining import drop, keep_tools

# Anthropic's tools the client executes: custom tools (no type, or "custom") and its
# versioned client tools. Everything else (web search and fetch, code execution, tool
# search, and any type added later) runs at Anthropic.
_CLIENT_TOOLS = ("bash_", "text_editor_", "computer_", "memory_")
_STATE = ("mcp_servers", "container")


def confine(body: dict[str, Any]) -> None:
    drop(body, _STATE)
    kept = {tool.get("name") for tool in keep_tools(body, _client_tool)}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in kept:
        body.pop("tool_choice")  # it named a server tool, which is gone


def _client_tool(tool: dict[str, Any]) -> bool:
    kind = tool.get("type")
    if kind is None or kind == "custom":
        return True
    return isinstance(kind, str) and kind.startswith(_CLIENT_TOOLS)


def stand_in(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
