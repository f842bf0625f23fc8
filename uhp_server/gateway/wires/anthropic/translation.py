"""Claude Code's Anthropic Messages API served by a Chat Completions provider."""

from __future__ import annotations

from uhp_server.gateway.wires import errors
from uhp_server.gateway.wires.anthropic.errors import anthropic_error
from uhp_server.gateway.wires.anthropic.request import estimate_tokens, translate_request
from uhp_server.gateway.wires.anthropic.stream import AnthropicStream, translate_completion
from uhp_server.gateway.wires.chat.wire import COMPLETIONS_PATH


class AnthropicOverChat:
    """Claude Code's Anthropic Messages API served by a Chat Completions provider."""

    wire = "anthropic"
    api = "chat"
    upstream_path = COMPLETIONS_PATH

    def request(self, body: dict, *, model: str) -> dict:
        return translate_request(body, model)

    def response(self, upstream: dict) -> dict:
        return translate_completion(upstream)

    def stream(self) -> AnthropicStream:
        return AnthropicStream()

    def error(self, status: int, upstream_body: bytes) -> bytes:
        found = errors.upstream_error(status, upstream_body)
        return errors.to_bytes(anthropic_error(status, found["message"]))

    def refusal(self, status: int, message: str) -> bytes:
        return errors.to_bytes(anthropic_error(status, message))

    @staticmethod
    def count_tokens(body: dict) -> dict:
        """`POST /v1/messages/count_tokens` has no Chat counterpart: an estimate (about four
        characters a token), which is what Claude Code uses it for (context budgeting)."""
        return {"input_tokens": estimate_tokens(body)}
