"""What an agent's model call may ask of the provider: the model, with tools the agent runs
itself. Nothing that makes the provider act outside the sandbox with the server's key.

A provider can do more than answer: run tools of its own (web search and fetch, remote MCP
servers, code interpreters, file search over the account's vector stores), keep running in
the background, and read back what the account stored (`previous_response_id`, stored
prompts, conversations). Forwarded as the agent wrote them, those reach the network and
the provider account past the sandbox's egress rules (Security §1.1: never a proxy with our
credential attached). So a model call's body keeps only the tools the agent runs itself, and
loses the fields that reach stored or background state. The agent's CLI never depends on
them: what it runs itself is all a sandboxed agent may do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Responses tools the client runs itself (`namespace` groups hold function tools, e.g. one
# per MCP server, which the agent reaches through the gateway's own MCP proxy).
_RESPONSES_CLIENT_TOOLS = {"function", "custom", "local_shell", "namespace"}
_RESPONSES_STATE = ("background", "previous_response_id", "conversation", "prompt")
_CHAT_CLIENT_TOOLS = {"function", "custom"}
# Anthropic's tools the client executes (bash, the text editor, computer use, memory) carry
# a versioned type too; its server tools (web search and fetch, code execution, tool search)
# run at Anthropic.
_ANTHROPIC_SERVER_TOOLS = ("web_search_", "web_fetch_", "code_execution_", "tool_search_tool_")
_ANTHROPIC_STATE = ("mcp_servers", "container")


def confine(wire: str, body: dict[str, Any]) -> dict[str, Any]:
    """The model call's body with only what stays inside the sandbox's reach; `wire`:
    responses, chat, anthropic or gemini."""
    if wire == "responses":
        _drop(body, _RESPONSES_STATE)
        _keep_tools(body, _responses_client_tool)
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and not _responses_client_tool(choice):
            body.pop("tool_choice")  # e.g. {"type": "web_search"}: a hosted tool, now gone
    elif wire == "chat":
        _drop(body, ("web_search_options",))
        _keep_tools(body, lambda tool: tool.get("type", "function") in _CHAT_CLIENT_TOOLS)
    elif wire == "anthropic":
        _drop(body, _ANTHROPIC_STATE)
        kept = {tool.get("name") for tool in _keep_tools(body, _anthropic_client_tool)}
        choice = body.get("tool_choice")
        if (
            isinstance(choice, dict)
            and choice.get("type") == "tool"
            and choice.get("name") not in kept
        ):
            body.pop("tool_choice")  # it named a server tool, which is gone
    elif wire == "gemini":
        _keep_gemini_functions(body)
    return body


def _responses_client_tool(tool: dict[str, Any]) -> bool:
    kind = tool.get("type")
    if kind == "namespace":
        inner = tool.get("tools")
        return isinstance(inner, list) and all(
            isinstance(t, dict) and t.get("type", "function") in ("function", "custom")
            for t in inner
        )
    return kind in _RESPONSES_CLIENT_TOOLS


def _anthropic_client_tool(tool: dict[str, Any]) -> bool:
    kind = tool.get("type")
    return not (isinstance(kind, str) and kind.startswith(_ANTHROPIC_SERVER_TOOLS))


def _drop(body: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        body.pop(key, None)


def _keep_tools(
    body: dict[str, Any], client_run: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return []
    kept = [tool for tool in tools if isinstance(tool, dict) and client_run(tool)]
    if kept:
        body["tools"] = kept
    else:
        body.pop("tools")
        body.pop("tool_choice", None)  # a choice among no tools is refused upstream
    return kept


def _keep_gemini_functions(body: dict[str, Any]) -> None:
    """Gemini's tools are objects of kinds (functionDeclarations, googleSearch, urlContext,
    codeExecution…): only the function declarations stay."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return
    kept = [
        {"functionDeclarations": tool["functionDeclarations"]}
        for tool in tools
        if isinstance(tool, dict) and "functionDeclarations" in tool
    ]
    if kept:
        body["tools"] = kept
    else:
        body.pop("tools")
        body.pop("toolConfig", None)
