"""What an agent's model call may ask of the provider: the model, over what the call itself
carries, with tools the agent runs itself. Nothing that makes the provider act outside the
sandbox with the server's key.

A provider can do more than answer. It can run tools of its own (web search and fetch,
remote MCP servers, code interpreters, file search over the account's vector stores),
fetch a URL named in a message (an image or a document by URL), read what the account
stored (files by id, a stored response or item, stored prompts, conversations) and keep
running in the background. Forwarded as the agent wrote them, each reaches the network or
the provider account past the sandbox's egress rules (Security §1.1: never a proxy with our
credential attached). So:

- tools the provider would run are dropped (Codex offers `web_search` at every call, and a
  call goes on without it), as are the fields that reach stored or background state;
- content the provider would fetch or look up (a URL that is not `data:`, a file id, an
  item reference) refuses the call: dropping it would change what the model is asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Responses tools the client runs itself (`namespace` groups hold function tools, e.g. one
# per MCP server, which the agent reaches through the gateway's own MCP proxy).
_RESPONSES_CLIENT_TOOLS = {"function", "custom", "local_shell", "namespace"}
_RESPONSES_STATE = ("background", "previous_response_id", "conversation", "prompt")
_CHAT_CLIENT_TOOLS = {"function", "custom"}
# Anthropic's tools the client executes: custom tools (no type, or "custom") and its
# versioned client tools. Everything else (web search and fetch, code execution, tool
# search, and any type added later) runs at Anthropic.
_ANTHROPIC_CLIENT_TOOLS = ("bash_", "text_editor_", "computer_", "memory_")
_ANTHROPIC_STATE = ("mcp_servers", "container")
_GEMINI_STATE = ("cachedContent", "cached_content")


class Confined(ValueError):
    """The call carries what the provider would fetch or look up; the message says what."""


def confine(wire: str, body: dict[str, Any]) -> dict[str, Any]:
    """The model call's body with only what stays inside the sandbox's reach; `wire`:
    responses, chat, anthropic or gemini. Raises Confined for content that cannot."""
    _BY_WIRE[wire](body)
    _no_fetches(body)
    return body


def _responses(body: dict[str, Any]) -> None:
    _drop(body, _RESPONSES_STATE)
    _keep_tools(body, _responses_client_tool)
    _keep_choice(body, _responses_client_tool)


def _chat(body: dict[str, Any]) -> None:
    _drop(body, ("web_search_options",))
    _keep_tools(body, lambda tool: tool.get("type", "function") in _CHAT_CLIENT_TOOLS)
    _keep_choice(body, lambda choice: choice.get("type") in _CHAT_CLIENT_TOOLS)


def _anthropic(body: dict[str, Any]) -> None:
    _drop(body, _ANTHROPIC_STATE)
    kept = {tool.get("name") for tool in _keep_tools(body, _anthropic_client_tool)}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in kept:
        body.pop("tool_choice")  # it named a server tool, which is gone


def _gemini(body: dict[str, Any]) -> None:
    _drop(body, _GEMINI_STATE)
    _keep_gemini_functions(body)


_BY_WIRE: dict[str, Callable[[dict[str, Any]], None]] = {
    "responses": _responses,
    "chat": _chat,
    "anthropic": _anthropic,
    "gemini": _gemini,
}


# -- tools ------------------------------------------------------------------------------------
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
    if kind is None or kind == "custom":
        return True
    return isinstance(kind, str) and kind.startswith(_ANTHROPIC_CLIENT_TOOLS)


def _keep_tools(
    body: dict[str, Any], client_run: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
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


def _keep_choice(body: dict[str, Any], client_run: Callable[[dict[str, Any]], bool]) -> None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and not client_run(choice):
        body.pop("tool_choice")  # e.g. {"type": "web_search"}: a hosted tool, now gone


def _keep_gemini_functions(body: dict[str, Any]) -> None:
    """Gemini's tools are objects of kinds (functionDeclarations, googleSearch, urlContext,
    codeExecution…): only the function declarations stay."""
    tools = body.get("tools")
    kept = (
        [
            {"functionDeclarations": t["functionDeclarations"]}
            for t in tools
            if isinstance(t, dict) and "functionDeclarations" in t
        ]
        if isinstance(tools, list)
        else []
    )
    if kept:
        body["tools"] = kept
    elif "tools" in body:
        body.pop("tools")
        _drop(body, ("toolConfig", "tool_config"))


# -- content ----------------------------------------------------------------------------------
# Subtrees that describe rather than carry content: tool definitions and output schemas may
# well name a property `file_id` or `image_url`.
_DESCRIPTIONS = {
    "tools",
    "tool_choice",
    "text",
    "response_format",
    "metadata",
    "parameters",
    "input_schema",
    "functionDeclarations",
    "generationConfig",
}
_BY_ID = {"file_id", "fileUri", "file_uri", "file_url"}


def _no_fetches(body: dict[str, Any]) -> None:
    """Refuse what would make the provider fetch a URL or look up the account's state,
    wherever it sits: a message's parts, a tool's output parts (Codex sends images there),
    system content, nested documents. Walked without recursion, every wire alike, since
    translations carry such parts from one wire into another's."""
    pending: list[Any] = [body]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict):
            _check_object(node)
            pending.extend(v for k, v in node.items() if k not in _DESCRIPTIONS)


def _check_object(node: dict[str, Any]) -> None:
    kind = str(node.get("type", "")).lower()
    if kind in ("item_reference", "container_upload"):
        raise Confined(f"A {kind} reads what the account stored; send the content itself.")
    for key in _BY_ID.intersection(node):
        if node[key] is not None:
            raise Confined(f"Content by {key} is not reachable from the sandbox; send it inline.")
    image = node.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if url is not None and not (isinstance(url, str) and url.startswith("data:")):
        raise Confined("An image by URL is not reachable from the sandbox; send a data: URL.")
    source = node.get("source")
    if isinstance(source, dict) and str(source.get("type", "")).lower() in ("url", "file"):
        raise Confined("A source by URL or file is not reachable; send it as base64.")


# -- helpers ----------------------------------------------------------------------------------
def _drop(body: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        body.pop(key, None)
