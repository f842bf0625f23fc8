"""Anthropic Messages as a wire: what Claude Code speaks, and what Anthropic serves."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from uhp_server.gateway.wires.anthropic import confine as rules
from uhp_server.gateway.wires.anthropic.api import AnthropicApi
from uhp_server.gateway.wires.anthropic.errors import ERROR_KINDS, anthropic_error
from uhp_server.gateway.wires.anthropic.translation import AnthropicOverChat
from uhp_server.gateway.wires.base import CallKind, ModelCall, Translation, Wire, WireHeaders


class AnthropicWire:
    name = "anthropic"
    rank = 2
    backend = "anthropic"
    version_in_base_url = False  # the Anthropic SDK appends /v1/… to its base URL
    root = ""
    endpoints = re.compile(r"messages|messages/count_tokens|models(/.+)?")
    model_calls = (
        ModelCall(re.compile("messages"), CallKind.ANSWER, model_in_body=True),
        ModelCall(re.compile("messages/count_tokens"), CallKind.COUNT_TOKENS, model_in_body=True),
    )
    headers = WireHeaders(
        token=("x-api-key",),
        forwarded=("anthropic-version", "anthropic-beta"),
        relayed=("anthropic-ratelimit-.*",),
    )
    error_kinds = ERROR_KINDS
    translations: Mapping[str, Callable[[], Translation]] = {"chat": AnthropicOverChat}
    as_api = AnthropicApi()

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return anthropic_error(status, message, kind)

    def models_answer(self, path: str, model: str, owner: str) -> dict[str, Any]:
        item = {
            "id": model,
            "type": "model",
            "display_name": model,
            "created_at": "1970-01-01T00:00:00Z",
        }
        return {"data": [item], "has_more": False, "first_id": model, "last_id": model}

    def confine(self, body: dict[str, Any]) -> None:
        rules.confine(body)

    def stand_in(self, text: str, *, item: bool) -> dict[str, Any]:
        return rules.stand_in(text)


WIRE: Wire = AnthropicWire()
