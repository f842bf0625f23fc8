"""The gateway's own answers to a CLI, each in the shape that CLI's wire parses (the wire's
`error_body`, `error_kinds` and `models_answer`)."""

from __future__ import annotations

from fastapi.responses import JSONResponse, Response

from uhp_server.gateway.wires import Translation, Wire

# Streamed answers must reach the CLI as they are written, never held by a proxy.
STREAM_HEADERS = {"x-accel-buffering": "no", "cache-control": "no-cache"}


def wire_error(wire: Wire, status: int, message: str, kind: str) -> JSONResponse:
    """An error in the shape the wire's own clients parse."""
    body = wire.error_body(status, message, kind)
    return JSONResponse(body, status_code=status, headers=STREAM_HEADERS)


def unauthorized(wire: Wire) -> JSONResponse:
    # One message for unknown, expired, revoked and wrong-backend tokens: nothing to probe.
    kind = wire.error_kinds.unauthorized
    return wire_error(wire, 401, "Invalid or expired gateway token.", kind)


def not_found(wire: Wire) -> JSONResponse:
    kind = wire.error_kinds.not_found
    return wire_error(wire, 404, "This endpoint is not available through the gateway.", kind)


def too_large(wire: Wire) -> JSONResponse:
    return wire_error(wire, 413, "Request body too large.", wire.error_kinds.invalid_request)


# A refused server credential is permanent, so the CLI is told in a way it does not retry:
# every CLI retries a 5xx (OpenCode backs off for over a minute, Qwen Code sends it 21
# times), none retries a plain 4xx. 424: the model call depended on the provider accepting
# the server's credential. Its type avoids "server_error", which OpenCode retries by name.
CREDENTIAL_REFUSED_STATUS = 424


def credential_refused(wire: Wire) -> JSONResponse:
    """The provider refused the server's own credential: not the agent's token (no 401 the
    CLI would blame on itself), and not worth asking again."""
    kind = wire.error_kinds.credential_refused
    message = "The model provider refused the server's credential."
    answer = wire_error(wire, CREDENTIAL_REFUSED_STATUS, message, kind)
    answer.headers["x-should-retry"] = "false"  # the OpenAI and Anthropic SDKs' own hint
    return answer


# The gateway's own 502 (the provider unreachable, the agent waiting for its user) says when
# to ask again. Without it OpenCode backs off 2, 4, 8, 16 and 30 s; with it it retries as
# briefly as the bases configured for two quick retries (Codex, Claude Code, Pi, Hermes).
# Qwen Code takes the hint only on a 429 or 503, and on a 503 it keeps retrying for minutes.
RETRY_AFTER_MS = 500


def bad_gateway(wire: Wire, message: str) -> JSONResponse:
    answer = wire_error(wire, 502, message, wire.error_kinds.bad_gateway)
    answer.headers["retry-after-ms"] = str(RETRY_AFTER_MS)
    return answer


def models_answer(wire: Wire, path: str, model: str, owner: str) -> JSONResponse:
    """The turn's one model, as the wire's models route at `path` lists it: for providers
    whose models route is absent or speaks another API, and for wires no provider serves
    (the model is pinned, so no other would run anyway)."""
    return JSONResponse(wire.models_answer(path, model, owner), headers=STREAM_HEADERS)


def bad_request(wire: Wire, translation: Translation | None, message: str) -> Response:
    if translation is None:
        return wire_error(wire, 400, message, wire.error_kinds.invalid_request)
    return Response(
        translation.refusal(400, message),
        status_code=400,
        headers={**STREAM_HEADERS, "content-type": "application/json"},
    )
