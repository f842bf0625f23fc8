"""What the OpenAI API's two wires (Responses and Chat Completions) share: one backend, one
error shape, one models listing, one way to call a provider of either, and usage counted in
either wire's words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uhp_server.gateway.wires.base import ErrorKinds, WireHeaders

BACKEND = "openai"

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
# The gateway's own refusals. A refused server credential's type avoids "server_error",
# which OpenCode retries by name.
ERROR_KINDS = ErrorKinds(
    unauthorized="invalid_request_error",
    not_found="invalid_request_error",
    credential_refused="provider_credential_refused",
    bad_gateway="server_error",
    invalid_request="invalid_request_error",
)
HEADERS = WireHeaders(forwarded=("openai-beta",), relayed=("openai-processing-ms",))
# Model ids may hold "/" and ":" (org/name, name:tag).
MODELS_ROUTES = r"models(/.+)?"


def openai_error(status: int, message: str, kind: str | None = None, code: object = None) -> dict:
    """The Responses/Chat error body (`{"error": {...}}`) Codex and the OpenAI SDK parse."""
    kind = kind or OPENAI_TYPES.get(status, "server_error" if status >= 500 else "api_error")
    if code is None and status == 429:
        code = "rate_limit_exceeded"
    code = None if code is None else str(code)  # clients parse it as a string
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def models_list(model: str, owner: str) -> dict[str, Any]:
    """`GET /models` holding one model."""
    item = {"id": model, "object": "model", "created": 0, "owned_by": owner}
    return {"object": "list", "data": [item]}


def openai_root(base_url: str) -> str:
    # OPENAI_BASE_URL conventionally includes the version (…/v1, or …/v1beta/openai for
    # compatible providers), so it is used as given.
    return base_url.strip().rstrip("/")


def openai_usage(counters: Mapping[str, int]) -> dict[str, int]:
    """Either wire's counters: a provider of one may answer in the other's (the OpenAI
    platform serves Chat beside Responses), so the counters themselves say which."""
    if "prompt_tokens" in counters:  # Chat Completions
        return {
            "input_tokens": counters["prompt_tokens"],
            "output_tokens": counters.get("completion_tokens", 0),
            "cache_read_tokens": counters.get("cached_tokens", 0),
            "cache_write_tokens": 0,
            "reasoning_tokens": counters.get("reasoning_tokens", 0),
        }
    return {  # Responses
        "input_tokens": counters.get("input_tokens", 0),
        "output_tokens": counters.get("output_tokens", 0),
        "cache_read_tokens": counters.get("cached_tokens", 0),
        "cache_write_tokens": 0,
        "reasoning_tokens": counters.get("reasoning_tokens", 0),
    }


class OpenAIApi:
    """A provider of either OpenAI wire, as the gateway calls it. Calls on any other wire
    reach it as Chat Completions: a Chat provider serves nothing else, and the OpenAI
    platform (a Responses provider) serves Chat beside Responses."""

    other_wires_as = "chat"
    version_headers: Mapping[str, str] = {}
    models_query: Mapping[str, str] = {}

    def root(self, base_url: str) -> str:
        return openai_root(base_url)

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    def usage(self, counters: Mapping[str, int]) -> dict[str, int]:
        return openai_usage(counters)
