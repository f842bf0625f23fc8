"""Errors in each wire's own shape: the provider's refusals rewritten, and our own."""

from __future__ import annotations

import json


class Untranslatable(ValueError):
    """The request uses something the provider's API cannot express; .message is readable."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# google.rpc status names, which the Gemini API (and so Gemini CLI) pairs with each code.
GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def upstream_error(status: int, body: bytes) -> dict:
    """What a provider said, from any of the shapes OpenAI-compatible servers answer with:
    `{"error": {"message", "type", "code"}}` (OpenAI, vLLM, LiteLLM), `{"error": "text"}`
    (Ollama), `{"message": ...}` / `{"detail": ...}` (vLLM's older and FastAPI's defaults),
    Anthropic's `{"type": "error", "error": {...}}`, or plain text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    found: dict = {}
    if isinstance(parsed, dict):
        inner = parsed.get("error")
        if isinstance(inner, dict):
            found = {k: inner[k] for k in ("message", "type", "code") if k in inner}
        elif isinstance(inner, str):
            found = {"message": inner}
        for key in ("message", "detail"):
            if "message" not in found and isinstance(parsed.get(key), str):
                found["message"] = parsed[key]
    elif text:
        found = {"message": text[:2000]}
    if not isinstance(found.get("message"), str) or not found["message"]:
        found["message"] = f"The model provider answered HTTP {status}."
    return found


def openai_error(status: int, message: str, kind: str | None = None, code: object = None) -> dict:
    """The Responses/Chat error body (`{"error": {...}}`) Codex and the OpenAI SDK parse."""
    kind = kind or OPENAI_TYPES.get(status, "server_error" if status >= 500 else "api_error")
    if code is None and status == 429:
        code = "rate_limit_exceeded"
    code = None if code is None else str(code)  # clients parse it as a string
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def anthropic_error(status: int, message: str) -> dict:
    """Anthropic's `{"type": "error", "error": {"type", "message"}}`."""
    kind = ANTHROPIC_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def gemini_error(status: int, message: str) -> dict:
    """The Gemini API's `{"error": {"code", "message", "status"}}`."""
    kind = GEMINI_STATUSES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    return {"error": {"code": status, "message": message, "status": kind}}


def to_bytes(body: dict) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
