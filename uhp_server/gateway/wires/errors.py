"""What every wire's errors share: a request no other API can express, reading what a
provider said in whichever shape it answered, and the bytes of an error body. Each wire's own
error shape lives in its folder."""

from __future__ import annotations

import json


class Untranslatable(ValueError):
    """The request uses something the provider's API cannot express; .message is readable."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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


def to_bytes(body: dict) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
