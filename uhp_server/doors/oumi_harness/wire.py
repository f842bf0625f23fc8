"""The protocol's request bodies, read strictly, and its status object.

A body the protocol does not allow is a 400 that fails only its row (never 401/403/404/409,
which the platform treats as fatal for the whole evaluation or as "busy").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uhp_server.engine import ChatMessage, ToolCall
from uhp_server.errors import ApiError
from uhp_server.gateway.connection import ModelConnection
from uhp_server.http.strict_json import parse_strict

PROTOCOL_VERSION = "1"
MAX_BODY_BYTES = 10 * 1024 * 1024
ROLES = ("system", "user", "assistant", "tool")
TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Submission:
    session_id: str
    invocation_id: str
    action: str  # start | resume
    messages: tuple[ChatMessage, ...]
    connection: ModelConnection


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, "invalid_input", message, param=param)


def parse_json(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, "request_too_large", "The request body is over 10 MiB.")
    try:
        body = parse_strict(raw)  # no NaN, no lone surrogate, no nesting past MAX_DEPTH
    except ValueError as exc:
        raise bad_request(f"The body is not JSON: {exc}.") from None
    if not isinstance(body, dict):
        raise bad_request("The body must be a JSON object.")
    return body


def ids_of(body: dict[str, Any]) -> tuple[str, str]:
    """(session_id, invocation_id) of a submit or cancel body, after its protocol_version."""
    if body.get("protocol_version") != PROTOCOL_VERSION:
        raise bad_request('protocol_version must be "1".', "protocol_version")
    return _text(body, "session_id"), _text(body, "invocation_id")


def parse_submission(body: dict[str, Any]) -> Submission:
    session_id, invocation_id = ids_of(body)
    action = body.get("session_action")
    if action not in ("start", "resume"):
        raise bad_request('session_action must be "start" or "resume".', "session_action")
    raw_messages = body.get("input_messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad_request("input_messages must be a non-empty array.", "input_messages")
    messages = tuple(_message(m, i) for i, m in enumerate(raw_messages))
    if action == "start" and messages[-1].role != "user":
        raise bad_request("A start must end with a user message.", "input_messages")
    if action == "resume":
        for message in messages:
            if message.role != "tool" or not message.tool_call_id:
                raise bad_request(
                    "A resume carries only tool messages with a tool_call_id.", "input_messages"
                )
    return Submission(
        session_id, invocation_id, action, messages, _connection(body.get("model_connection"))
    )


def status_object(
    session_id: str, invocation_id: str, status: str, error: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "session_id": session_id,
        "invocation_id": invocation_id,
        "status": status,
    }
    if status == "failed":
        body["error"] = {"message": error or "The turn could not finish."}
    return body


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > 512:
        raise bad_request(f"{name} must be a non-empty string.", name)
    return value


def _content(value: Any, where: str) -> str | None:
    """A message's content: a string, null, or an array of text parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if not isinstance(part, dict) or not isinstance(part.get("text"), str):
                raise bad_request("Only text content parts are supported.", where)
            texts.append(part["text"])
        return "".join(texts)
    raise bad_request("content must be a string, null or an array of text parts.", where)


def _message(raw: Any, index: int) -> ChatMessage:
    where = f"input_messages[{index}]"
    if not isinstance(raw, dict) or raw.get("role") not in ROLES:
        raise bad_request("Each message needs a role: system, user, assistant or tool.", where)
    role = raw["role"]
    content = _content(raw.get("content"), where + ".content")
    tool_calls = raw.get("tool_calls") or []
    if not isinstance(tool_calls, list):
        raise bad_request("tool_calls must be an array.", where + ".tool_calls")
    calls = tuple(_tool_call(c, where) for c in tool_calls)
    if calls and role != "assistant":
        raise bad_request("Only assistant messages carry tool_calls.", where)
    if content is None and not calls:
        raise bad_request("content is required unless tool_calls is set.", where)
    call_id = raw.get("tool_call_id")
    if role == "tool" and (not isinstance(call_id, str) or not call_id):
        raise bad_request("A tool message needs its tool_call_id.", where)
    return ChatMessage(role, content, calls, call_id if role == "tool" else None)


def _tool_call(raw: Any, where: str) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if (
        not isinstance(function, dict)
        or not isinstance(raw.get("id"), str)
        or not isinstance(function.get("name"), str)
        or not isinstance(function.get("arguments", ""), str)
    ):
        raise bad_request("A tool call needs an id and a function with name and arguments.", where)
    return ToolCall(raw["id"], function["name"], function.get("arguments", ""))


def _connection(raw: Any) -> ModelConnection:
    if not isinstance(raw, dict):
        raise bad_request("model_connection must be an object.", "model_connection")
    for name in ("base_url", "model", "api_key"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise bad_request(f"model_connection.{name} must be a string.", "model_connection")
    settings = raw.get("generation_settings") or {}
    if not isinstance(settings, dict):
        raise bad_request("generation_settings must be an object.", "model_connection")
    return ModelConnection(
        base_url=raw["base_url"], model=raw["model"], api_key=raw["api_key"], generation=settings
    )
