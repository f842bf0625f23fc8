"""The gateway's own answers to a CLI, each in the shape that CLI's wire parses."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response

from uhp_server.gateway.providers import Provider
from uhp_server.gateway.wires import Translation
from uhp_server.gateway.wires.gemini.errors import gemini_error

# Streamed answers must reach the CLI as they are written, never held by a proxy.
STREAM_HEADERS = {"x-accel-buffering": "no", "cache-control": "no-cache"}


def wire_error(backend: str, status: int, message: str, kind: str) -> JSONResponse:
    """An error in the shape the backend's own clients parse ("gemini": the Gemini API's
    routes under the openai backend, whose clients parse Google's shape)."""
    if backend == "gemini":
        body: dict = gemini_error(status, message)
    elif backend == "anthropic":
        body = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status, headers=STREAM_HEADERS)


def unauthorized(backend: str) -> JSONResponse:
    # One message for unknown, expired, revoked and wrong-backend tokens: nothing to probe.
    kind = "authentication_error" if backend == "anthropic" else "invalid_request_error"
    return wire_error(backend, 401, "Invalid or expired gateway token.", kind)


def not_found(backend: str) -> JSONResponse:
    kind = "not_found_error" if backend == "anthropic" else "invalid_request_error"
    return wire_error(backend, 404, "This endpoint is not available through the gateway.", kind)


# A refused server credential is permanent, so the CLI is told in a way it does not retry:
# every CLI retries a 5xx (OpenCode backs off for over a minute, Qwen Code sends it 21
# times), none retries a plain 4xx. 424: the model call depended on the provider accepting
# the server's credential. Its type avoids "server_error", which OpenCode retries by name.
CREDENTIAL_REFUSED_STATUS = 424


def credential_refused(backend: str) -> JSONResponse:
    """The provider refused the server's own credential: not the agent's token (no 401 the
    CLI would blame on itself), and not worth asking again."""
    kind = "api_error" if backend == "anthropic" else "provider_credential_refused"
    message = "The model provider refused the server's credential."
    answer = wire_error(backend, CREDENTIAL_REFUSED_STATUS, message, kind)
    answer.headers["x-should-retry"] = "false"  # the OpenAI and Anthropic SDKs' own hint
    return answer


# The gateway's own 502 (the provider unreachable, the agent waiting for its user) says when
# to ask again. Without it OpenCode backs off 2, 4, 8, 16 and 30 s; with it it retries as
# briefly as the bases configured for two quick retries (Codex, Claude Code, Pi, Hermes).
# Qwen Code takes the hint only on a 429 or 503, and on a 503 it keeps retrying for minutes.
RETRY_AFTER_MS = 500


def bad_gateway(backend: str, message: str) -> JSONResponse:
    kind = "api_error" if backend == "anthropic" else "server_error"
    answer = wire_error(backend, 502, message, kind)
    answer.headers["retry-after-ms"] = str(RETRY_AFTER_MS)
    return answer


def gemini_models_answer(model: str, one: bool) -> JSONResponse:
    """The turn's one model as the Gemini API lists it (`models.list`, or `models.get`)."""
    item = {
        "name": f"models/{model}",
        "displayName": model,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }
    return JSONResponse(item if one else {"models": [item]}, headers=STREAM_HEADERS)


def models_answer(backend: str, provider: Provider, model: str) -> JSONResponse:
    """The turn's one model, in the wire's shape: for providers whose models route is absent
    or speaks another API (the model is pinned, so no other would run anyway)."""
    if backend == "anthropic":
        item: dict[str, Any] = {"id": model, "type": "model", "display_name": model}
        item["created_at"] = "1970-01-01T00:00:00Z"
        body = {"data": [item], "has_more": False, "first_id": model, "last_id": model}
    else:
        item = {"id": model, "object": "model", "created": 0, "owned_by": provider.name}
        body = {"object": "list", "data": [item]}
    return JSONResponse(body, headers=STREAM_HEADERS)


def bad_request(backend: str, translation: Translation | None, message: str) -> Response:
    if translation is None:
        return wire_error(backend, 400, message, "invalid_request_error")
    return Response(
        translation.refusal(400, message),
        status_code=400,
        headers={**STREAM_HEADERS, "content-type": "application/json"},
    )
