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
  item reference) is replaced by a text part that says it was not sent, so the model knows,
  and the conversation that holds it can go on.
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
    responses, chat, anthropic or gemini. Raises Confined for a fetch that is not a part of
    anything (no list holds it), which no text can stand in for."""
    _BY_WIRE[wire](body)
    _no_fetches(wire, body)
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
# And what a tool is called with or answered: the agent's own data, sent to the provider as
# such (Anthropic's `tool_use.input`, Gemini's `functionCall.args` and `functionResponse.
# response`); a tool may well take a `source` of type url. Anthropic's tool results and
# Gemini's response parts carry content, and are walked.
_ARGUMENTS = {"args", "response"}
_CALLS = {"tool_use", "server_tool_use", "mcp_tool_use"}
_BY_ID = {"file_id", "fileUri", "file_uri", "file_url"}


def _no_fetches(wire: str, body: dict[str, Any]) -> None:
    """Replace what would make the provider fetch a URL or look up the account's state,
    wherever it sits (a message's parts, a tool's output parts where Codex sends images,
    system content, nested documents), by a text part saying so, in the wire's own shape.
    Replaced rather than refused: the part stays in the conversation's history, and a call
    refused for it would be refused again at every later call of the session. Walked without
    recursion, every wire alike, since translations carry parts from one wire into another."""
    # (node, the list holding the part it belongs to, the part's index in that list)
    pending: list[tuple[Any, list[Any] | None, int]] = [(body, None, 0)]
    while pending:
        node, holder, index = pending.pop()
        if isinstance(node, list):
            pending.extend((item, node, n) for n, item in enumerate(node))
        elif isinstance(node, dict):
            fetched = _fetched(node)
            if fetched is None:
                skipped = _skipped(node)
                pending.extend((v, holder, index) for k, v in node.items() if k not in skipped)
            elif holder is None:
                raise Confined(f"{fetched} is not reachable from the sandbox; send it inline.")
            else:
                holder[index] = _placeholder(wire, fetched, item=holder is body.get("input"))


def _skipped(node: dict[str, Any]) -> set[str]:
    if node.get("type") in _CALLS:
        return _DESCRIPTIONS | _ARGUMENTS | {"input"}
    return _DESCRIPTIONS | _ARGUMENTS


def _fetched(node: dict[str, Any]) -> str | None:
    """What this object would have the provider fetch or look up, or None."""
    kind = str(node.get("type", "")).lower()
    if kind in ("item_reference", "container_upload"):
        return f"A stored {kind}"
    for key in _BY_ID.intersection(node):
        if node[key] is not None:
            return f"Content by {key}"
    image = node.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if url is not None and not (isinstance(url, str) and url.startswith("data:")):
        return "An image by URL"
    source = node.get("source")
    if isinstance(source, dict) and str(source.get("type", "")).lower() in ("url", "file"):
        kind = str(node.get("type", "part"))
        return f"{'An' if kind[:1] in 'aeiou' else 'A'} {kind} by {source['type']}"
    return None


def _placeholder(wire: str, fetched: str, *, item: bool) -> dict[str, Any]:
    text = f"[{fetched} was not sent: this model gateway forwards inline content only.]"
    if wire == "responses":
        part = {"type": "input_text", "text": text}
        return {"role": "user", "content": [part]} if item else part
    if wire == "gemini":
        return {"text": text}
    return {"type": "text", "text": text}


# -- helpers ----------------------------------------------------------------------------------
def _drop(body: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        body.pop(key, None)
