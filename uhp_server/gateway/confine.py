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

from typing import Any

from uhp_server.gateway.wires import Wire, wire_named


class Confined(ValueError):
    """The call carries what the provider would fetch or look up; the message says what."""


def confine(wire: str, body: dict[str, Any]) -> dict[str, Any]:
    """The model call's body with only what stays inside the sandbox's reach; `wire` names
    the wire it speaks (its own rules for tools and state: Wire.confine). Raises Confined for
    a fetch that is not a part of anything (no list holds it), which no text can stand in for."""
    speaks = wire_named(wire)
    speaks.confine(body)
    _no_fetches(speaks, body)
    return body


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


def _no_fetches(wire: Wire, body: dict[str, Any]) -> None:
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


def _placeholder(wire: Wire, fetched: str, *, item: bool) -> dict[str, Any]:
    text = f"[{fetched} was not sent: this model gateway forwards inline content only.]"
    return wire.stand_in(text, item=item)
