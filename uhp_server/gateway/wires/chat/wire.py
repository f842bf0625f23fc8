"""Chat Completions as a wire: what Hermes, OpenCode, Pi and Qwen Code speak, and the API every
translation reaches a Chat provider in."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from uhp_server.gateway.wires import openai_api
from uhp_server.gateway.wires.base import CallKind, ModelCall, Translation, Wire
from uhp_server.gateway.wires.chat import confine as rules

COMPLETIONS_PATH = "chat/completions"


class ChatWire:
    name = "chat"
    rank = 1
    backend = openai_api.BACKEND
    version_in_base_url = True
    root = ""
    endpoints = re.compile(rf"{re.escape(COMPLETIONS_PATH)}|{openai_api.MODELS_ROUTES}")
    model_calls = (
        ModelCall(re.compile(re.escape(COMPLETIONS_PATH)), CallKind.ANSWER, model_in_body=True),
    )
    headers = openai_api.HEADERS
    error_kinds = openai_api.ERROR_KINDS
    # None: a Chat CLI needs a provider that serves Chat (every OpenAI-style one does).
    translations: Mapping[str, Callable[[], Translation]] = {}
    as_api = openai_api.OpenAIApi()

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return openai_api.openai_error(status, message, kind)

    def models_answer(self, path: str, model: str, owner: str) -> dict[str, Any]:
        return openai_api.models_list(model, owner)

    def confine(self, body: dict[str, Any]) -> None:
        rules.confine(body)

    def stand_in(self, text: str, *, item: bool) -> dict[str, Any]:
        return rules.stand_in(text)


WIRE: Wire = ChatWire()
