"""A Gemini API `generateContent` request (what Gemini CLI sends) as a Chat Completions request.

The model is in the Gemini URL, not the body, and so is streaming (`:streamGenerateContent`):
the gateway puts `stream: true` into the body before translating, the way other wires say it.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field

from uhp_server.gateway.wires.chat.messages import ChatMessages, image_part, text_part
from uhp_server.gateway.wires.errors import Untranslatable

CALLING_MODES = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto"}
# Gemini's thinking budget (tokens) or level, as the nearest Chat `reasoning_effort`.
THINKING_LEVELS = {"MINIMAL": "minimal", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}
_BUDGET_STEPS = ((1024, "low"), (8192, "medium"))
_SAMPLING = {
    "temperature": "temperature",
    "topP": "top_p",
    "maxOutputTokens": "max_tokens",
    "seed": "seed",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
}


@dataclass
class CallIds:
    """Gemini ids its function calls only sometimes; Chat needs an id on every call and its
    result. A call without one gets `call_<n>`, and a response without one answers the
    oldest unanswered call of the same name."""

    _open: list[tuple[str, str]] = field(default_factory=list)  # (name, id), unanswered
    _count: int = 0

    def call(self, name: str, given: object) -> str:
        self._count += 1
        call_id = given if isinstance(given, str) and given else f"call_{self._count}"
        self._open.append((name, call_id))
        return call_id

    def response(self, name: str, given: object) -> str:
        if isinstance(given, str) and given:
            self._open = [(n, i) for n, i in self._open if i != given]
            return given
        for position, (open_name, call_id) in enumerate(self._open):
            if open_name == name:
                del self._open[position]
                return call_id
        raise Untranslatable(f"A functionResponse for `{name}` answers no earlier functionCall.")


def translate_request(body: dict, model: str) -> dict:
    """The Chat body for `body`.

    Not forwarded, because Chat Completions has no counterpart and none of them is content:
    `topK`, `safetySettings`, `cachedContent`, `labels`, `thinkingConfig.includeThoughts`,
    and the thought signatures on parts. Earlier thoughts (`thought: true` parts) are not
    resent, as with the other wires.
    """
    chat: dict = {"model": model}
    messages = ChatMessages()
    messages.add_system(_system_text(body.get("systemInstruction")))
    ids = CallIds()
    contents = body.get("contents")
    if isinstance(contents, dict):  # the API takes one Content as well as a list
        contents = [contents]
    for position, content in enumerate(contents if isinstance(contents, list) else []):
        if not isinstance(content, dict):
            raise Untranslatable(f"contents[{position}] is not an object.")
        _content(content, f"contents[{position}]", messages, ids)
    chat["messages"] = messages.build()
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        choice = _tool_choice(body.get("toolConfig"))
        if choice is not None:
            chat["tool_choice"] = choice
    chat.update(_generation(body.get("generationConfig")))
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def _system_text(raw: object) -> str:
    if isinstance(raw, str):
        return raw
    parts = raw.get("parts") if isinstance(raw, dict) else None
    texts = []
    for i, part in enumerate(parts if isinstance(parts, list) else []):
        if not (isinstance(part, dict) and isinstance(part.get("text"), str)):
            raise Untranslatable(f"systemInstruction.parts[{i}]: system content can only be text.")
        texts.append(part["text"])
    return "\n\n".join(t for t in texts if t)


def _content(content: dict, where: str, messages: ChatMessages, ids: CallIds) -> None:
    role = content.get("role") or "user"
    if role not in ("user", "model", "function"):
        raise Untranslatable(f"{where} has an unknown role `{role}`.")
    parts: list[dict] = []
    raw_parts = content.get("parts")
    for i, part in enumerate(raw_parts if isinstance(raw_parts, list) else []):
        spot = f"{where}.parts[{i}]"
        if not isinstance(part, dict):
            raise Untranslatable(f"{spot} is not an object.")
        if part.get("thought") is True:
            continue  # the model's own earlier reasoning: Chat takes none back
        if isinstance(part.get("text"), str):
            parts.append(text_part(part["text"]))
        elif "functionCall" in part and role == "model":
            _flush_model_text(parts, messages)
            call = part["functionCall"] if isinstance(part["functionCall"], dict) else {}
            name = str(call.get("name") or "")
            arguments = json.dumps(call.get("args") or {}, ensure_ascii=False)
            messages.add_tool_call(ids.call(name, call.get("id")), name, arguments)
        elif "functionResponse" in part and role != "model":
            _function_response(part["functionResponse"], spot, messages, ids)
        elif ("inlineData" in part or "fileData" in part) and role != "model":
            parts.append(_media(part, spot))
        else:
            kind = next((k for k in part if k not in ("thoughtSignature", "thought")), "empty")
            raise Untranslatable(
                f"{spot} is a `{kind}` part, which a Chat Completions provider cannot take."
            )
    if role == "model":
        _flush_model_text(parts, messages)
    else:
        messages.add_user(parts)


def _flush_model_text(parts: list[dict], messages: ChatMessages) -> None:
    text = "".join(p["text"] for p in parts)
    if text:
        messages.add_assistant_text(text)
    parts.clear()


def _function_response(raw: object, where: str, messages: ChatMessages, ids: CallIds) -> None:
    answer = raw if isinstance(raw, dict) else {}
    name = str(answer.get("name") or "")
    call_id = ids.response(name, answer.get("id"))
    response = answer.get("response")
    parts: list[dict] = []
    # Gemini CLI's tools answer {"output": "..."} or {"error": "..."}: the text itself is what
    # a Chat model should read, not a JSON wrapper around it.
    if isinstance(response, dict) and set(response) <= {"output", "error"}:
        if isinstance(response.get("error"), str):
            parts.append(text_part(f"[tool error] {response['error']}"))
        if isinstance(response.get("output"), str):
            parts.append(text_part(response["output"]))
    if not parts and response is not None:
        parts.append(text_part(json.dumps(response, ensure_ascii=False)))
    inner = answer.get("parts")
    for i, part in enumerate(inner if isinstance(inner, list) else []):
        if isinstance(part, dict):
            parts.append(_media(part, f"{where}.functionResponse.parts[{i}]"))
    messages.add_tool_result(call_id, parts)


def _media(part: dict, where: str) -> dict:
    if isinstance(part.get("text"), str):  # e.g. what gateway/confine.py put for a fetch
        return text_part(part["text"])
    inline = part.get("inlineData")
    if isinstance(inline, dict) and str(inline.get("mimeType", "")).startswith("image/"):
        return image_part(f"data:{inline['mimeType']};base64,{inline.get('data', '')}")
    if isinstance(inline, dict) and str(inline.get("mimeType", "")).startswith("text/"):
        return text_part(_decoded_text(inline.get("data"), where))
    file = part.get("fileData")
    if isinstance(file, dict) and str(file.get("mimeType", "")).startswith("image/"):
        return image_part(str(file.get("fileUri", "")))
    mime = (inline or file or {}).get("mimeType") if isinstance(inline or file, dict) else None
    raise Untranslatable(
        f"{where}: a `{mime}` attachment cannot be sent to a Chat Completions provider "
        "(images inline or by URL, and text, only)."
    )


def _decoded_text(data: object, where: str) -> str:
    try:
        return base64.b64decode(str(data or ""), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise Untranslatable(f"{where}: inline text data is not base64 UTF-8.") from None


def _tools(raw: object) -> list[dict]:
    functions = []
    for i, tool in enumerate(raw if isinstance(raw, list) else []):
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        others = [k for k in tool if k != "functionDeclarations"] if isinstance(tool, dict) else []
        if others:
            raise Untranslatable(
                f"tools[{i}] (`{others[0]}`) is a tool Google's servers run; a Chat Completions "
                "provider cannot offer it."
            )
        for declaration in declarations if isinstance(declarations, list) else []:
            if isinstance(declaration, dict):
                functions.append({"type": "function", "function": _function(declaration)})
    return functions


def _function(declaration: dict) -> dict:
    function: dict = {"name": str(declaration.get("name") or "")}
    if declaration.get("description"):
        function["description"] = declaration["description"]
    if isinstance(declaration.get("parametersJsonSchema"), dict):
        function["parameters"] = declaration["parametersJsonSchema"]
    elif isinstance(declaration.get("parameters"), dict):
        function["parameters"] = json_schema(declaration["parameters"])
    else:
        function["parameters"] = {"type": "object", "properties": {}}
    return function


def json_schema(schema: object) -> object:
    """Gemini's OpenAPI-style `Schema` (upper-case type names) as JSON Schema."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, object] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key == "nullable":
            continue
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: json_schema(inner) for name, inner in value.items()}
        else:
            out[key] = json_schema(value) if isinstance(value, dict | list) else value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _tool_choice(config: object) -> object:
    calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
    if not isinstance(calling, dict):
        return None
    mode = str(calling.get("mode") or "AUTO").upper()
    if mode not in CALLING_MODES:
        raise Untranslatable(f"toolConfig mode `{mode}` cannot be expressed in Chat Completions.")
    allowed = calling.get("allowedFunctionNames")
    if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1:
        return {"type": "function", "function": {"name": str(allowed[0])}}
    return CALLING_MODES[mode]


def _generation(config: object) -> dict:
    if not isinstance(config, dict):
        return {}
    chat: dict = {}
    for key, target in _SAMPLING.items():
        value = config.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            chat[target] = value
    stops = config.get("stopSequences")
    if isinstance(stops, list) and stops:
        chat["stop"] = stops
    if isinstance(config.get("candidateCount"), int) and config["candidateCount"] > 1:
        raise Untranslatable("generationConfig.candidateCount above 1 is not supported.")
    effort = _effort(config.get("thinkingConfig"))
    if effort is not None:
        chat["reasoning_effort"] = effort
    response_format = _response_format(config)
    if response_format is not None:
        chat["response_format"] = response_format
    return chat


def _effort(thinking: object) -> str | None:
    """None leaves reasoning to the provider: no thinking config, or a dynamic budget (-1)."""
    if not isinstance(thinking, dict):
        return None
    level = thinking.get("thinkingLevel")
    if isinstance(level, str) and level.upper() in THINKING_LEVELS:
        return THINKING_LEVELS[level.upper()]
    budget = thinking.get("thinkingBudget")
    if not isinstance(budget, int) or budget < 0:
        return None
    if budget == 0:
        return None  # thinking off: Chat has no portable "none", so the provider's default
    return next((effort for cap, effort in _BUDGET_STEPS if budget <= cap), "high")


def _response_format(config: dict) -> dict | None:
    schema = config.get("responseJsonSchema")
    if not isinstance(schema, dict) and isinstance(config.get("responseSchema"), dict):
        schema = json_schema(config["responseSchema"])
    if isinstance(schema, dict):
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
    if config.get("responseMimeType") == "application/json":
        return {"type": "json_object"}
    return None


def estimate_tokens(body: dict) -> int:
    """A rough input-token count for `countTokens` (about four characters a token)."""
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)
