"""The gateway's HTTP routes: check the turn token, swap in the real key, stream through."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from uhp_server.gateway.bodies import read_capped
from uhp_server.gateway.tokens import DOOR_SCOPE_KEY, TokenRegistry, TurnGrant
from uhp_server.gateway.upstreams import ANTHROPIC_VERSION, Upstream, Upstreams
from uhp_server.gateway.usage import UsageExtractor

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_ERROR_BODY = 1024 * 1024

# Endpoints an agent needs, relative to the API root. Anything else is 404, so a token can
# never reach files, batches, fine-tuning or admin endpoints with the server's key.
_ALLOWED = {
    "openai": re.compile(r"responses(/.+)?|chat/completions|models(/.+)?"),
    "anthropic": re.compile(r"messages|messages/count_tokens|models(/.+)?"),
}
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@~-]*")  # no "", ".", "..", "%", "?", "#"
# POSTs to these always run the turn's model, even when the body names none.
_MODEL_ENDPOINTS = {"responses", "chat/completions", "messages", "messages/count_tokens"}

_FORWARD_REQUEST_HEADERS = (
    "content-type",
    "accept",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "idempotency-key",
    "x-stainless-retry-count",
)
_FORWARD_RESPONSE_HEADERS = re.compile(
    r"content-type|retry-after(-ms)?|x-request-id|request-id|x-should-retry"
    r"|x-ratelimit-.*|anthropic-ratelimit-.*|openai-processing-ms"
)
_STREAM_HEADERS = {"x-accel-buffering": "no", "cache-control": "no-cache"}


def wire_error(backend: str, status: int, message: str, kind: str) -> JSONResponse:
    """An error in the shape the backend's own clients parse."""
    if backend == "anthropic":
        body: dict = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status, headers=_STREAM_HEADERS)


def _unauthorized(backend: str) -> JSONResponse:
    # One message for unknown, expired, revoked and wrong-backend tokens: nothing to probe.
    kind = "authentication_error" if backend == "anthropic" else "invalid_request_error"
    return wire_error(backend, 401, "Invalid or expired gateway token.", kind)


def _not_found(backend: str) -> JSONResponse:
    kind = "not_found_error" if backend == "anthropic" else "invalid_request_error"
    return wire_error(backend, 404, "This endpoint is not available through the gateway.", kind)


def _bad_gateway(backend: str, message: str) -> JSONResponse:
    kind = "api_error" if backend == "anthropic" else "server_error"
    return wire_error(backend, 502, message, kind)


def _token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or None


def _path_allowed(backend: str, path: str) -> bool:
    segments = path.split("/")
    return bool(_ALLOWED[backend].fullmatch(path)) and all(_SEGMENT.fullmatch(s) for s in segments)


def _rewrite_model(body: bytes, path: str, model: str) -> bytes | None:
    """The body with its top-level model set to the turn's; None when it is not a JSON object.

    Only the top-level key is touched, so the model that runs is the one the turn reports."""
    if not body.strip():
        return body
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if "model" in obj or path in _MODEL_ENDPOINTS:
        obj["model"] = model
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _upstream_headers(request: Request, upstream: Upstream) -> dict[str, str]:
    headers = {k: v for k in _FORWARD_REQUEST_HEADERS if (v := request.headers.get(k))}
    if upstream.backend == "anthropic":
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
    # Uncompressed bytes, so usage can be read from them as they pass.
    headers["accept-encoding"] = "identity"
    headers.update(upstream.auth_headers())  # last: nothing the caller sent can override it
    return headers


def _response_headers(resp: httpx.Response) -> dict[str, str]:
    headers = {k: v for k, v in resp.headers.items() if _FORWARD_RESPONSE_HEADERS.fullmatch(k)}
    return {**headers, **_STREAM_HEADERS}


async def _relay(
    resp: httpx.Response, extractor: UsageExtractor, backend: str
) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.aiter_bytes():
            extractor.feed(chunk)  # before yielding: usage is recorded when the client sees it
            yield chunk
        extractor.finish()
    except httpx.HTTPError as exc:
        # Headers are already sent; ending the body early is what the client will notice.
        log.warning("gateway %s: upstream stream broke: %s", backend, type(exc).__name__)
    finally:
        await resp.aclose()


async def _error_response(resp: httpx.Response, upstream: Upstream) -> Response:
    """An upstream error, passed on without ever echoing the server's key."""
    try:
        body = b""
        async for chunk in resp.aiter_bytes():
            body += chunk
            if len(body) > MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        body = b""
    finally:
        await resp.aclose()
    if resp.status_code in (401, 403):
        # The server's own credential was refused: the agent's token is fine, so say so
        # as a gateway failure rather than an auth error the CLI would blame on itself.
        log.error(
            "gateway %s: upstream refused the server's key (%d)", upstream.backend, resp.status_code
        )
        return _bad_gateway(upstream.backend, "The model provider refused the server's credential.")
    body = body.replace(upstream.api_key.encode(), b"[redacted]")
    return Response(body, status_code=resp.status_code, headers=_response_headers(resp))


async def forward(
    backend: str, path: str, request: Request, tokens: TokenRegistry, upstreams: Upstreams
) -> Response:
    token = _token(request)
    grant: TurnGrant | None = (
        tokens.get(token, request.scope.get(DOOR_SCOPE_KEY)) if token else None
    )
    if grant is None or grant.backend != backend:
        return _unauthorized(backend)
    if not _path_allowed(backend, path):
        return _not_found(backend)
    upstream = upstreams.get(backend)
    if upstream is None:
        log.error("gateway %s: a token was issued but no upstream key is configured", backend)
        return _bad_gateway(backend, "The model provider is not configured.")

    body = b""
    if request.method == "POST":
        raw = await read_capped(request, MAX_REQUEST_BYTES)
        if raw is None:
            return wire_error(backend, 413, "Request body too large.", "invalid_request_error")
        rewritten = _rewrite_model(raw, path, grant.model)
        if rewritten is None:
            return wire_error(
                backend, 400, "Request body must be a JSON object.", "invalid_request_error"
            )
        body = rewritten

    # Scheme, host and root come only from settings; the caller adds a checked path + query.
    req = upstreams.http.build_request(
        request.method,
        upstream.url(path),
        params=list(request.query_params.multi_items()),
        headers=_upstream_headers(request, upstream),
        content=body if request.method == "POST" else None,
    )
    try:
        resp = await upstreams.http.send(req, stream=True)
    except httpx.HTTPError as exc:
        log.warning("gateway %s: upstream unreachable: %s", backend, type(exc).__name__)
        return _bad_gateway(backend, "The model provider could not be reached.")

    if not resp.is_success:
        return await _error_response(resp, upstream)
    extractor = UsageExtractor(backend, resp.headers.get("content-type", ""), grant.usage)
    return StreamingResponse(
        _relay(resp, extractor, backend),
        status_code=resp.status_code,
        headers=_response_headers(resp),
        background=BackgroundTask(resp.aclose),  # also when the client went away early
    )


def make_gateway_router(tokens: TokenRegistry, upstreams: Upstreams) -> APIRouter:
    """Routes for /gateway/openai/v1/... and /gateway/anthropic/v1/... (see paths.py)."""
    router = APIRouter(include_in_schema=False)

    @router.api_route("/gateway/openai/v1/{path:path}", methods=["GET", "POST"])
    async def openai_gateway(path: str, request: Request) -> Response:
        return await forward("openai", path, request, tokens, upstreams)

    @router.api_route("/gateway/anthropic/v1/{path:path}", methods=["GET", "POST"])
    async def anthropic_gateway(path: str, request: Request) -> Response:
        return await forward("anthropic", path, request, tokens, upstreams)

    return router
