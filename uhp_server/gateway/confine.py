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

from collections.abc import Callable, Iterator
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
    return body


def _responses(body: dict[str, Any]) -> None:
    _drop(body, _RESPONSES_STATE)
    _keep_tools(body, _responses_client_tool)
    _keep_choice(body, _responses_client_tool)
    _responses_content(body.get("input"))


def _chat(body: dict[str, Any]) -> None:
    _drop(body, ("web_search_options",))
    _keep_tools(body, lambda tool: tool.get("type", "function") in _CHAT_CLIENT_TOOLS)
    _keep_choice(body, lambda choice: choice.get("type") in _CHAT_CLIENT_TOOLS)
    for message in _dicts(body.get("messages")):
        _chat_parts(message.get("content"))


def _anthropic(body: dict[str, Any]) -> None:
    _drop(body, _ANTHROPIC_STATE)
    kept = {tool.get("name") for tool in _keep_tools(body, _anthropic_client_tool)}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in kept:
        body.pop("tool_choice")  # it named a server tool, which is gone
    _anthropic_blocks(body.get("system"))
    for message in _dicts(body.get("messages")):
        _anthropic_blocks(message.get("content"))


def _gemini(body: dict[str, Any]) -> None:
    _drop(body, _GEMINI_STATE)
    _keep_gemini_functions(body)
    for content in _dicts(body.get("contents")):
        for part in _dicts(content.get("parts")):
            if "fileData" in part or "file_data" in part:
                raise Confined("A part by file URI (fileData) is not reachable; send it inline.")


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
def _responses_content(input_: Any) -> None:
    for item in _dicts(input_):
        if item.get("type") == "item_reference":
            raise Confined("An item reference reads what the account stored; send the item.")
        for part in _dicts(item.get("content")):
            kind = part.get("type")
            if kind == "input_image":
                _inline(part.get("image_url"), "input_image")
                _no_id(part, "input_image")
            elif kind == "input_file":
                if part.get("file_url") is not None:
                    raise Confined("An input_file by URL is not reachable; send file_data.")
                _no_id(part, "input_file")


def _chat_parts(content: Any) -> None:
    for part in _dicts(content):
        kind = part.get("type")
        if kind == "image_url":
            image = part.get("image_url")
            _inline(image.get("url") if isinstance(image, dict) else image, "image_url")
        elif kind == "file":
            file = part.get("file")
            if isinstance(file, dict):
                _no_id(file, "file")


def _anthropic_blocks(blocks: Any) -> None:
    for block in _dicts(blocks):
        kind = block.get("type")
        if kind == "container_upload":
            raise Confined("A container upload reads the account's files; send the content.")
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") in ("url", "file"):
            raise Confined(f"A {kind} by {source['type']} is not reachable; send it as base64.")
        if kind == "tool_result":
            _anthropic_blocks(block.get("content"))


def _inline(url: Any, what: str) -> None:
    if url is not None and not (isinstance(url, str) and url.startswith("data:")):
        raise Confined(f"An {what} by URL is not reachable from the sandbox; send a data: URL.")


def _no_id(part: dict[str, Any], what: str) -> None:
    if part.get("file_id") is not None:
        raise Confined(f"An {what} by file_id reads the account's files; send the content.")


# -- helpers ----------------------------------------------------------------------------------
def _drop(body: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        body.pop(key, None)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """The objects of a list (a string or anything else holds none)."""
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))
