"""An Anthropic Messages request (what Claude Code sends) as a Chat Completions request."""

from __future__ import annotations

import json

from uhp_server.gateway.wires.chat.messages import ChatMessages, image_part, text_part
from uhp_server.gateway.wires.errors import Untranslatable

TOOL_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def translate_request(body: dict, model: str) -> dict:
    """The Chat body for `body`.

    Not forwarded, because Chat Completions has no counterpart and none of them is content:
    `thinking` and `output_config` (a Chat provider reasons, or not, on its own terms),
    `metadata`, `context_management`, `top_k`, and `cache_control` on blocks.
    """
    chat: dict = {"model": model}
    messages = ChatMessages()
    messages.add_system(_system_text(body.get("system"), "system"))
    for position, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict):
            raise Untranslatable(f"messages[{position}] is not an object.")
        _message(message, f"messages[{position}]", messages)
    chat["messages"] = messages.build()
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            chat["tool_choice"] = _tool_choice(choice)
            if choice.get("disable_parallel_tool_use") is True:
                chat["parallel_tool_calls"] = False
    if isinstance(body.get("max_tokens"), int):
        chat["max_tokens"] = body["max_tokens"]
    if isinstance(body.get("stop_sequences"), list) and body["stop_sequences"]:
        chat["stop"] = body["stop_sequences"]
    for key in ("temperature", "top_p"):
        if isinstance(body.get(key), int | float):
            chat[key] = body[key]
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def _system_text(raw: object, where: str) -> str:
    if raw is None or isinstance(raw, str):
        return raw or ""
    texts = []
    for i, block in enumerate(raw if isinstance(raw, list) else []):
        if not (isinstance(block, dict) and block.get("type") == "text"):
            raise Untranslatable(f"{where}[{i}]: system content can only be text.")
        texts.append(block.get("text", ""))
    return "\n\n".join(t for t in texts if t)


def _blocks(content: object) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _message(message: dict, where: str, messages: ChatMessages) -> None:
    role = message.get("role")
    content = message.get("content")
    if role == "system":  # Claude Code puts its environment context here
        messages.add_system(_system_text(content, f"{where}.content"))
        return
    if role not in ("user", "assistant"):
        raise Untranslatable(f"{where} has an unknown role `{role}`.")
    parts: list[dict] = []
    for i, block in enumerate(_blocks(content)):
        spot = f"{where}.content[{i}]"
        kind = block.get("type")
        if kind == "text":
            parts.append(text_part(block.get("text", "")))
        elif kind in ("image", "document") and role == "user":
            parts.append(_media(block, spot))
        elif kind == "tool_use" and role == "assistant":
            _flush_assistant(parts, messages)
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            messages.add_tool_call(block.get("id", ""), block.get("name", ""), arguments)
        elif kind == "tool_result" and role == "user":
            messages.add_tool_result(block.get("tool_use_id", ""), _tool_result(block, spot))
        elif kind in ("thinking", "redacted_thinking"):
            # The model's own earlier reasoning: Chat Completions takes none back.
            continue
        else:
            raise Untranslatable(
                f"{spot} is a `{kind}` block, which a Chat Completions provider cannot take."
            )
    if role == "user":
        messages.add_user(parts)
    else:
        _flush_assistant(parts, messages)


def _flush_assistant(parts: list[dict], messages: ChatMessages) -> None:
    text = "".join(p["text"] for p in parts if p["type"] == "text")
    if text:
        messages.add_assistant_text(text)
    parts.clear()


def _media(block: dict, where: str) -> dict:
    source = block.get("source")
    if not isinstance(source, dict):
        source = {}
    kind, source_type = block.get("type"), source.get("type")
    if kind == "document" and source_type == "text":
        return text_part(source.get("data", ""))
    if kind == "image" and source_type == "base64":
        return image_part(
            f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
        )
    if kind == "image" and source_type == "url":
        return image_part(source.get("url", ""))
    raise Untranslatable(
        f"{where}: a {kind} from a `{source_type}` source cannot be sent to a Chat Completions "
        "provider (images as base64 or URL, documents as text only)."
    )


def _tool_result(block: dict, where: str) -> list[dict]:
    parts = []
    for i, inner in enumerate(_blocks(block.get("content"))):
        kind = inner.get("type")
        if kind == "text":
            parts.append(text_part(inner.get("text", "")))
        elif kind in ("image", "document"):
            parts.append(_media(inner, f"{where}.content[{i}]"))
        else:
            raise Untranslatable(f"{where}.content[{i}] is a `{kind}` block in a tool result.")
    if block.get("is_error") is True:
        parts.insert(0, text_part("[tool error]"))
    return parts


def _tools(raw: object) -> list[dict]:
    functions = []
    for i, tool in enumerate(raw if isinstance(raw, list) else []):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind not in (None, "custom") or "input_schema" not in tool:
            raise Untranslatable(
                f"tools[{i}] (`{kind}`) is a tool Anthropic's servers run; a Chat Completions "
                "provider cannot offer it."
            )
        function: dict = {"name": tool.get("name", "")}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = tool["input_schema"]
        functions.append({"type": "function", "function": function})
    return functions


def _tool_choice(choice: dict) -> object:
    kind = choice.get("type")
    if kind in TOOL_CHOICES:
        return TOOL_CHOICES[kind]
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name", "")}}
    raise Untranslatable(f"tool_choice type `{kind}` cannot be expressed in Chat Completions.")


def estimate_tokens(body: dict) -> int:
    """A rough input-token count for `count_tokens` (about four characters a token)."""
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)
