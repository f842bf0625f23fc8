"""Gemini CLI's Gemini API (`generateContent`) served by a Chat Completions provider."""

from __future__ import annotations

from uhp_server.gateway.wires import errors
from uhp_server.gateway.wires.chat.wire import COMPLETIONS_PATH
from uhp_server.gateway.wires.gemini.errors import gemini_error
from uhp_server.gateway.wires.gemini.request import estimate_tokens, translate_request
from uhp_server.gateway.wires.gemini.stream import GeminiStream, translate_completion


class GeminiOverChat:
    """Gemini CLI's Gemini API (`generateContent`) served by a Chat Completions provider."""

    wire = "gemini"
    api = "chat"
    upstream_path = COMPLETIONS_PATH

    def request(self, body: dict, *, model: str) -> dict:
        return translate_request(body, model)

    def response(self, upstream: dict) -> dict:
        return translate_completion(upstream)

    def stream(self) -> GeminiStream:
        return GeminiStream()

    def error(self, status: int, upstream_body: bytes) -> bytes:
        found = errors.upstream_error(status, upstream_body)
        return errors.to_bytes(gemini_error(status, found["message"]))

    def refusal(self, status: int, message: str) -> bytes:
        return errors.to_bytes(gemini_error(status, message))

    @staticmethod
    def count_tokens(body: dict) -> dict:
        """`:countTokens` has no Chat counterpart: an estimate, which is what Gemini CLI uses
        it for (context budgeting)."""
        return {"totalTokens": estimate_tokens(body)}
