"""Codex's Responses API served by a Chat Completions provider.

One instance per model call: `request()` learns the tool-name mapping that `response()` and
`stream()` need to name the tools back in the CLI's terms.
"""

from __future__ import annotations

from uhp_server.gateway.wires import errors
from uhp_server.gateway.wires.chat.wire import COMPLETIONS_PATH
from uhp_server.gateway.wires.openai_api import openai_error
from uhp_server.gateway.wires.responses.request import ToolMap, translate_request
from uhp_server.gateway.wires.responses.stream import ResponsesStream, translate_completion


class ResponsesOverChat:
    """Codex's Responses API served by a Chat Completions provider."""

    wire = "responses"
    api = "chat"
    upstream_path = COMPLETIONS_PATH

    def __init__(self) -> None:
        self._tools = ToolMap()

    def request(self, body: dict, *, model: str) -> dict:
        self._tools = ToolMap()
        return translate_request(body, model, self._tools)

    def response(self, upstream: dict) -> dict:
        return translate_completion(upstream, self._tools)

    def stream(self) -> ResponsesStream:
        return ResponsesStream(self._tools)

    def error(self, status: int, upstream_body: bytes) -> bytes:
        found = errors.upstream_error(status, upstream_body)
        kind = found.get("type") if isinstance(found.get("type"), str) else None
        body = openai_error(status, found["message"], kind, found.get("code"))
        return errors.to_bytes(body)

    def refusal(self, status: int, message: str) -> bytes:
        return errors.to_bytes(openai_error(status, message))
