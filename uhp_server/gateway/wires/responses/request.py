"""A Responses API request (what Codex sends) as a Chat Completions request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from uhp_server.gateway.wires.chat.messages import ChatMessages, image_part, text_part
from uhp_server.gateway.wires.errors import Untranslatable

# Tools OpenAI's own servers run; a Chat provider has nothing that would run them, so they
# are not offered to the model (it then cannot call them, so no call is lost).
HOSTED_TOOLS = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "file_search",
        "code_interpreter",
        "image_generation",
        "computer_use_preview",
        "mcp",
    }
)
CUSTOM_INPUT = "input"  # the one string parameter a freeform (custom) tool becomes
NAMESPACE_SEPARATOR = "__"
EFFORTS = ("minimal", "low", "medium", "high")


@dataclass
class ToolRef:
    """What a Chat function name stands for on the Responses side."""

    name: str
    namespace: str | None = None
    custom: bool = False


@dataclass
class ToolMap:
    """Chat function name ↔ Responses tool (namespaced and freeform tools are flattened)."""

    by_chat_name: dict[str, ToolRef] = field(default_factory=dict)

    def add(self, ref: ToolRef) -> str:
        chat_name = self.chat_name(ref.name, ref.namespace)
        self.by_chat_name[chat_name] = ref
        return chat_name

    @staticmethod
    def chat_name(name: str, namespace: str | None) -> str:
        return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name

    def ref(self, chat_name: str) -> ToolRef:
        return self.by_chat_name.get(chat_name) or ToolRef(chat_name)


def translate_request(body: dict, model: str, tools: ToolMap) -> dict:
    """The Chat body for `body`; fills `tools` with the name mapping the answer needs."""
    for key in ("previous_response_id", "conversation"):
        if body.get(key):
            raise Untranslatable(
                f"`{key}` needs server-side conversation state, which a Chat Completions "
                "provider does not keep; send the whole conversation in `input`."
            )
    if body.get("background"):
        raise Untranslatable("`background` is not available with a Chat Completions provider.")
    chat: dict = {"model": model}
    functions = _tools(body.get("tools"), tools)
    messages = ChatMessages()
    if isinstance(body.get("instructions"), str):
        messages.add_system(body["instructions"])
    _input(body.get("input"), messages, tools)
    chat["messages"] = messages.build()
    if functions:
        chat["tools"] = functions
        if body.get("tool_choice") is not None:
            chat["tool_choice"] = _tool_choice(body["tool_choice"], tools)
        if isinstance(body.get("parallel_tool_calls"), bool):
            chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    _settings(body, chat)
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def _settings(body: dict, chat: dict) -> None:
    for key in ("temperature", "top_p"):
        if isinstance(body.get(key), int | float):
            chat[key] = body[key]
    if isinstance(body.get("max_output_tokens"), int):
        chat["max_tokens"] = body["max_output_tokens"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") in EFFORTS:
        chat["reasoning_effort"] = reasoning["effort"]
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        chat["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        chat["response_format"] = {"type": "json_object"}


def _tools(raw: object, tools: ToolMap) -> list[dict]:
    functions: list[dict] = []
    for tool in raw if isinstance(raw, list) else []:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "function":
            functions.append(_function(tool, tools.add(ToolRef(tool.get("name", "")))))
        elif kind == "namespace":
            for inner in tool.get("tools") or []:
                if inner.get("type", "function") != "function":
                    raise Untranslatable(f"Unsupported tool type in namespace: {inner['type']}.")
                ref = ToolRef(inner.get("name", ""), namespace=tool.get("name"))
                functions.append(_function(inner, tools.add(ref)))
        elif kind == "custom":
            chat_name = tools.add(ToolRef(tool.get("name", ""), custom=True))
            functions.append(_custom_function(tool, chat_name))
        elif kind in HOSTED_TOOLS:
            continue
        else:
            raise Untranslatable(
                f"The tool type `{kind}` cannot be offered through a Chat Completions provider."
            )
    return functions


def _function(tool: dict, chat_name: str) -> dict:
    function: dict = {"name": chat_name}
    if tool.get("description"):
        function["description"] = tool["description"]
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    if tool.get("strict") is True:
        function["strict"] = True
    return {"type": "function", "function": function}


def _custom_function(tool: dict, chat_name: str) -> dict:
    """A freeform tool as a function taking its raw input as one string."""
    fmt = tool.get("format")
    if not isinstance(fmt, dict):
        fmt = {}
    about = "The tool's raw input."
    if fmt.get("type") == "grammar" and fmt.get("definition"):
        about += f" It must match this {fmt.get('syntax', '')} grammar:\n{fmt['definition']}"
    parameters = {
        "type": "object",
        "properties": {CUSTOM_INPUT: {"type": "string", "description": about}},
        "required": [CUSTOM_INPUT],
    }
    function = {
        "name": chat_name,
        "description": tool.get("description", ""),
        "parameters": parameters,
    }
    return {"type": "function", "function": function}


def _tool_choice(choice: object, tools: ToolMap) -> object:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        name = ToolMap.chat_name(choice.get("name", ""), choice.get("namespace"))
        return {"type": "function", "function": {"name": name}}
    raise Untranslatable(
        f"tool_choice {json.dumps(choice)} cannot be expressed in Chat Completions."
    )


def _input(raw: object, messages: ChatMessages, tools: ToolMap) -> None:
    if isinstance(raw, str):
        messages.add_user([text_part(raw)])
        return
    for position, item in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(item, dict):
            raise Untranslatable(f"input[{position}] is not an object.")
        _item(item, position, messages, tools)


def _item(item: dict, position: int, messages: ChatMessages, tools: ToolMap) -> None:
    kind = item.get("type", "message")
    if kind == "message":
        _message(item, position, messages)
    elif kind == "function_call":
        name = ToolMap.chat_name(item.get("name", ""), item.get("namespace"))
        messages.add_tool_call(item.get("call_id", ""), name, item.get("arguments") or "{}")
    elif kind == "custom_tool_call":
        arguments = json.dumps({CUSTOM_INPUT: item.get("input", "")})
        messages.add_tool_call(item.get("call_id", ""), item.get("name", ""), arguments)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        parts = _parts(item.get("output"), f"input[{position}].output")
        messages.add_tool_result(item.get("call_id", ""), parts)
    elif kind == "reasoning":
        # The model's own earlier reasoning: Chat Completions has no request field for it
        # (and providers differ on whether they accept it back), so it is not resent.
        return
    else:
        raise Untranslatable(
            f"input[{position}] has type `{kind}`, which a Chat Completions provider cannot take."
        )


def _message(item: dict, position: int, messages: ChatMessages) -> None:
    role = item.get("role")
    parts = _parts(item.get("content"), f"input[{position}].content")
    if role in ("system", "developer"):
        if any(p["type"] != "text" for p in parts):
            raise Untranslatable(f"input[{position}]: a {role} message can only hold text.")
        messages.add_system("\n".join(p["text"] for p in parts))
    elif role == "user":
        messages.add_user(parts)
    elif role == "assistant":
        messages.add_assistant_text("".join(p["text"] for p in parts if p["type"] == "text"))
    else:
        raise Untranslatable(f"input[{position}] has an unknown role `{role}`.")


def _parts(raw: object, where: str) -> list[dict]:
    """Content parts (or a string) as Chat parts; refuses what Chat cannot carry."""
    if isinstance(raw, str):
        return [text_part(raw)]
    parts = []
    for i, part in enumerate(raw if isinstance(raw, list) else []):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text", "summary_text"):
            parts.append(text_part(part.get("text", "")))
        elif kind == "refusal":
            parts.append(text_part(part.get("refusal", "")))
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append(image_part(part["image_url"], part.get("detail")))
        else:
            what = f"an `{kind}` part" if kind else "a part"
            how = " by file_id" if kind == "input_image" else ""
            raise Untranslatable(
                f"{where}[{i}] is {what}{how}, which a Chat Completions provider cannot take."
            )
    return parts
