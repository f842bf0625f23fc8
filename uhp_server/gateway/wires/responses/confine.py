"""What a Responses call may not ask of the provider (gateway/confine.py says why)."""

from __future__ import annotations

from typing import Any

from uhp_server.gateway.wires.confining import drop, keep_choice, keep_tools

# Responses tools the client runs itself (`namespace` groups hold function tools, e.g. one
# per MCP server, which the agent reaches through the gateway's own MCP proxy).
_CLIENT_TOOLS = {"function", "custom", "local_shell", "namespace"}
_STATE = ("background", "previous_response_id", "conversation", "prompt")


def confine(body: dict[str, Any]) -> None:
    drop(body, _STATE)
    keep_tools(body, _client_tool)
    keep_choice(body, _client_tool)


def _client_tool(tool: dict[str, Any]) -> bool:
    kind = tool.get("type")
    if kind == "namespace":
        inner = tool.get("tools")
        return isinstance(inner, list) and all(
            isinstance(t, dict) and t.get("type", "function") in ("function", "custom")
            for t in inner
        )
    return kind in _CLIENT_TOOLS


def stand_in(text: str, *, item: bool) -> dict[str, Any]:
    part = {"type": "input_text", "text": text}
    return {"role": "user", "content": [part]} if item else part
