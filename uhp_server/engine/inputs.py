"""Task input (Tasks §2): a bare string or a list of items, flattened into one prompt."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from uhp_server.errors import ApiError
from uhp_server.ids import new_id

_TEXT_PARTS = {"input_text", "output_text", "text"}
_NOT_YET = {"input_file", "input_image"}


@dataclass
class NormalizedInput:
    items: list[dict[str, Any]]  # as GET /v1/responses/{id}/input_items returns them
    prompt: str
    instructions: list[str] = field(default_factory=list)  # system/developer messages


def _invalid(message: str, param: str) -> ApiError:
    return ApiError(400, "invalid_input", message, param=param)


def _part_texts(content: Any, param: str) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise _invalid("Message content must be a string or a list of parts.", param)
    texts = []
    for i, part in enumerate(content):
        where = f"{param}[{i}]"
        if not isinstance(part, dict):
            raise _invalid("Each content part must be an object.", where)
        kind = part.get("type")
        if kind in _NOT_YET:
            raise _invalid(f"Content of type '{kind}' is not supported by this server.", where)
        if kind not in _TEXT_PARTS:
            raise _invalid(f"Unknown content part type '{kind}'.", f"{where}.type")
        if not isinstance(part.get("text"), str):
            raise _invalid("A text part needs a string 'text'.", f"{where}.text")
        texts.append(part["text"])
    return texts


def _message(role: str, texts: list[str]) -> dict[str, Any]:
    part_type = "output_text" if role == "assistant" else "input_text"
    return {
        "id": new_id("message"),
        "type": "message",
        "role": role,
        "content": [{"type": part_type, "text": text} for text in texts],
    }


def normalize_input(raw: str | list[dict[str, Any]]) -> NormalizedInput:
    if isinstance(raw, str):
        if not raw.strip():
            raise _invalid("The input is empty.", "input")
        return NormalizedInput(items=[_message("user", [raw])], prompt=raw)
    if not raw:
        raise _invalid("The input is empty.", "input")
    items: list[dict[str, Any]] = []
    turns: list[tuple[str, str]] = []
    instructions: list[str] = []
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        kind = item.get("type", "message")
        if kind != "message":
            raise _invalid(
                f"Input items of type '{kind}' are not accepted: the harness runs its own tools.",
                f"{where}.type",
            )
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise _invalid("A message needs a role: user, assistant, system or developer.", where)
        texts = _part_texts(item.get("content"), f"{where}.content")
        items.append(_message(role, texts))
        text = "\n".join(texts)
        if role in ("system", "developer"):
            instructions.append(text)
        else:
            turns.append((role, text))
    if not any(role == "user" and text.strip() for role, text in turns):
        raise _invalid("The input has no user text.", "input")
    if all(role == "user" for role, _ in turns):
        prompt = "\n\n".join(text for _, text in turns)
    else:
        prompt = "\n\n".join(f"{role.capitalize()}: {text}" for role, text in turns)
    return NormalizedInput(items=items, prompt=prompt, instructions=instructions)
