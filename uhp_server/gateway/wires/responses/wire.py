"""The Responses API as a wire: what Codex speaks, and what the OpenAI platform serves."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from uhp_server.gateway.wires import openai_api
from uhp_server.gateway.wires.base import CallKind, ModelCall, Translation, Wire
from uhp_server.gateway.wires.responses import confine as rules
from uhp_server.gateway.wires.responses.translation import ResponsesOverChat


class ResponsesWire:
    name = "responses"
    rank = 0
    backend = openai_api.BACKEND
    version_in_base_url = True
    root = ""
    endpoints = re.compile(rf"responses|responses/compact|{openai_api.MODELS_ROUTES}")
    model_calls = (
        ModelCall(re.compile("responses"), CallKind.ANSWER, model_in_body=True),
        # Compaction is the OpenAI platform's own: nothing to translate it into.
        ModelCall(re.compile("responses/compact"), CallKind.UNTRANSLATED, model_in_body=True),
    )
    headers = openai_api.HEADERS
    error_kinds = openai_api.ERROR_KINDS
    translations: Mapping[str, Callable[[], Translation]] = {"chat": ResponsesOverChat}
    as_api = openai_api.OpenAIApi()

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return openai_api.openai_error(status, message, kind)

    def models_answer(self, path: str, model: str, owner: str) -> dict[str, Any]:
        return openai_api.models_list(model, owner)

    def confine(self, body: dict[str, Any]) -> None:
        rules.confine(body)

    def stand_in(self, text: str, *, item: bool) -> dict[str, Any]:
        return rules.stand_in(text, item=item)


WIRE: Wire = ResponsesWire()
