"""The Gemini API as a wire: what Gemini CLI speaks. No provider serves it here: its calls
always reach a Chat Completions provider, translated.

Gemini CLI is given the openai backend's base URL and its SDK appends `v1beta/models/…`: the
model, and whether to stream, are named in the path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from uhp_server.gateway.wires import openai_api
from uhp_server.gateway.wires.base import CallKind, ModelCall, Translation, Wire, WireHeaders
from uhp_server.gateway.wires.gemini import confine as rules
from uhp_server.gateway.wires.gemini.errors import ERROR_KINDS, gemini_error
from uhp_server.gateway.wires.gemini.translation import GeminiOverChat

ROOT = "v1beta/"
MODELS = f"{ROOT}models"


def _call(method: str) -> re.Pattern[str]:
    return re.compile(f"{MODELS}/.+:{method}")  # model ids may hold "/" and ":"


class GeminiWire:
    name = "gemini"
    rank = 3
    backend = openai_api.BACKEND
    version_in_base_url = True
    root = ROOT
    endpoints = re.compile(f"{MODELS}(/.+)?")
    model_calls = (
        ModelCall(_call("generateContent"), CallKind.ANSWER, model_in_body=False),
        ModelCall(
            _call("streamGenerateContent"), CallKind.ANSWER, model_in_body=False, streams=True
        ),
        ModelCall(_call("countTokens"), CallKind.COUNT_TOKENS, model_in_body=False),
    )
    headers = WireHeaders(token=("x-goog-api-key",))
    error_kinds = ERROR_KINDS
    translations: Mapping[str, Callable[[], Translation]] = {"chat": GeminiOverChat}
    as_api = None

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return gemini_error(status, message, kind)

    def models_answer(self, path: str, model: str, owner: str) -> dict[str, Any]:
        """`models.list`, or `models.get` of the one model."""
        item = {
            "name": f"models/{model}",
            "displayName": model,
            "supportedGenerationMethods": ["generateContent", "countTokens"],
        }
        return {"models": [item]} if path == MODELS else item

    def confine(self, body: dict[str, Any]) -> None:
        rules.confine(body)

    def stand_in(self, text: str, *, item: bool) -> dict[str, Any]:
        return rules.stand_in(text)


WIRE: Wire = GeminiWire()
