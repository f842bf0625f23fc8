"""The concrete translations: what a CLI speaks over what a provider serves.

One instance per model call: `request()` learns the tool-name mapping that `response()`
and `stream()` need to name the tools back in the CLI's terms.
"""

from __future__ import annotations

from uhp_server.gateway.wire import (
    anthropic_request,
    anthropic_stream,
    errors,
    gemini_request,
    gemini_stream,
    responses_request,
    responses_stream,
)
from uhp_server.gateway.wire.anthropic_stream import AnthropicStream
from uhp_server.gateway.wire.gemini_stream import GeminiStream
from uhp_server.gateway.wire.responses_request import ToolMap
from uhp_server.gateway.wire.responses_stream import ResponsesStream

CHAT_PATH = "chat/completions"


class ResponsesOverChat:
    """Codex's Responses API served by a Chat Completions provider."""

    wire = "responses"
    api = "chat"
    upstream_path = CHAT_PATH

    def __init__(self) -> None:
        self._tools = ToolMap()

    def request(self, body: dict, *, model: str) -> dict:
        self._tools = ToolMap()
        return responses_request.translate_request(body, model, self._tools)

    def response(self, upstream: dict) -> dict:
        return responses_stream.translate_completion(upstream, self._tools)

    def stream(self) -> ResponsesStream:
        return ResponsesStream(self._tools)

    def error(self, status: int, upstream_body: bytes) -> bytes:
        found = errors.upstream_error(status, upstream_body)
        kind = found.get("type") if isinstance(found.get("type"), str) else None
        body = errors.openai_error(status, found["message"], kind, found.get("code"))
        return errors.to_bytes(body)

    def refusal(self, status: int, message: str) -> bytes:
        return errors.to_bytes(errors.openai_error(status, message))


class AnthropicOverChat:
    """Claude Code's Anthropic Messages API served by a Chat Completions provider."""

    wire = "anthropic"
    api = "chat"
    upstream_path = CHAT_PATH

    def request(self, body: dict, *, model: str) -> dict:
        return anthropic_request.translate_request(body, model)

    def response(self, upstream: dict) -> dict:
        return anthropic_stream.translate_completion(upstream)

    def stream(self) -> AnthropicStream:
        return AnthropicStream()

    def error(self, status: int, upstream_body: bytes) -> bytes:
        found = errors.upstream_error(status, upstream_body)
        return errors.to_bytes(errors.anthropic_error(status, found["message"]))

    def refusal(self, status: int, message: str) -> bytes:
        return errors.to_bytes(errors.anthropic_error(status, message))

    @staticmethod
    def count_tokens(body: dict) -> dict:
        """`POST /v1/messages/count_tokens` has no Chat counterpart: an estimate (about four
        characters a token), which is what Claude Code uses it for (context budgeting)."""
        return {"input_tokens": anthropic_request.estimate_tokens(body)}


class GeminiOverChat:
    """Gemini CLI's Gemini API (`generateContent`) served by a Chat Completions provider."""

    wire = "gemini"
    api = "chat"
    upstream_path = CHAT_PATH

    def request(self, body: dict, *, model: str) -> dict:
        return gemini_request.translate_request(body, model)

    def response(self, upstream: dict) -> dict:
        return gemini_stream.translate_completion(upstream)

    def stream(self) -> GeminiStream:
        return GeminiStream()

    def error(self, status: int, upstream_body: bytes) -> bytes:
        found = errors.upstream_error(status, upstream_body)
        return errors.to_bytes(errors.gemini_error(status, found["message"]))

    def refusal(self, status: int, message: str) -> bytes:
        return errors.to_bytes(errors.gemini_error(status, message))

    @staticmethod
    def count_tokens(body: dict) -> dict:
        """`:countTokens` has no Chat counterpart: an estimate, which is what Gemini CLI uses
        it for (context budgeting)."""
        return {"totalTokens": gemini_request.estimate_tokens(body)}
