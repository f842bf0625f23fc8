"""The Starlette app: routes, auth, model check, recording and the SLEEP/FAIL effects."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import threading
import urllib.parse
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import anthropic_messages, embeddings, openai_chat, openai_responses
from .images import find_images
from .script import plan

WIRES: dict[str, ModuleType] = {
    "/v1/responses": openai_responses,
    "/v1/chat/completions": openai_chat,
    "/v1/messages": anthropic_messages,
}
OPENAI_ERROR_TYPES = {401: "invalid_request_error", 429: "rate_limit_error"}


class Recorder:
    """Thread-safe list of recorded requests (read from the test thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[dict] = []

    def add(self, request: Request, body: object) -> dict:
        entry = {
            "method": request.method,
            "path": request.url.path,
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "body": body,
            "script": None,
            "step": None,
        }
        with self._lock:
            self._entries.append(entry)
        return entry

    def update(self, entry: dict, **fields: object) -> None:
        with self._lock:
            entry.update(fields)

    def entries(self) -> list[dict]:
        with self._lock:
            return copy.deepcopy(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# What a rate-limited provider tells its client about when to come back.
RATE_LIMIT_HEADERS = {"retry-after": "7", "x-ratelimit-remaining-requests": "0"}


def _error(anthropic: bool, status: int, message: str, code: str) -> JSONResponse:
    headers = RATE_LIMIT_HEADERS if status == 429 else None
    if anthropic:
        body = anthropic_messages.error_body(status, message)
        return JSONResponse(body, status_code=status, headers=headers)
    kind = OPENAI_ERROR_TYPES.get(
        status, "server_error" if status >= 500 else "invalid_request_error"
    )
    body = openai_chat.error_body(message, code, kind)
    return JSONResponse(body, status_code=status, headers=headers)


def _key_forms(key: str) -> dict[bytes, bytes]:
    """How a careless provider echoes the caller's key in an error (FAIL's `{key…}`), as the
    bytes of the JSON body: every other character as a JSON \\u escape, percent-encoded,
    base64, or as it is."""
    escaped = "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(key))
    return {
        b"{key}": key.encode(),
        b"{key:escaped}": escaped.encode(),
        b"{key:url}": urllib.parse.quote(key, safe="").encode(),
        b"{key:base64}": base64.b64encode(f"Bearer {key}".encode()),
    }


def _echoing(response: JSONResponse, key: str) -> Response:
    """The error with each `{key…}` in its message replaced by the key in that form."""
    body = bytes(response.body)
    for placeholder, form in _key_forms(key).items():
        body = body.replace(placeholder, form)
    headers = {k: v for k, v in response.headers.items() if k != "content-length"}
    return Response(body, response.status_code, headers=headers)


async def _hang(request: Request, seconds: float) -> bool:
    """Sleep ``seconds``; False if the client left or the app is closing first."""
    deadline = asyncio.get_running_loop().time() + seconds
    while (left := deadline - asyncio.get_running_loop().time()) > 0:
        if request.app.state.closing or await request.is_disconnected():
            return False
        await asyncio.sleep(min(0.1, left))
    return True


async def _until_closing(request: Request, source: AsyncIterator[str]) -> AsyncIterator[str]:
    """Pass the stream through, cutting it short when the server is stopping."""
    async for chunk in source:
        if request.app.state.closing:
            return
        yield chunk


def create_app(
    api_key: str,
    models: list[str],
    *,
    chat_only: bool = False,
    required_headers: dict[str, str] | None = None,
) -> Starlette:
    """Build the provider app; its ``state.recorder`` holds the recorded requests.

    ``chat_only``: serve only ``POST /v1/chat/completions`` (no models route, every other
    path 404), like a bare vLLM or llama.cpp server. ``required_headers``: refuse (401) a
    model call that lacks one of these headers with this value (a platform's run token)."""
    recorder = Recorder()
    required = {k.lower(): v for k, v in (required_headers or {}).items()}

    def authorized(request: Request) -> bool:
        bearer = request.headers.get("authorization", "")
        key_ok = bearer == f"Bearer {api_key}" or request.headers.get("x-api-key") == api_key
        return key_ok and all(request.headers.get(k) == v for k, v in required.items())

    async def record(request: Request) -> tuple[dict, object, int]:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        return recorder.add(request, body), body, len(raw)

    async def list_models(request: Request) -> Response:
        await record(request)
        anthropic = "anthropic-version" in request.headers
        if not authorized(request):
            return _error(anthropic, 401, "invalid api key", "invalid_api_key")
        if anthropic:
            data: list[dict[str, Any]] = [
                {"id": m, "type": "model", "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in models
            ]
            first, last = (models[0], models[-1]) if models else (None, None)
            return JSONResponse(
                {"data": data, "has_more": False, "first_id": first, "last_id": last}
            )
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in models]
        return JSONResponse({"object": "list", "data": data})

    async def generate(request: Request) -> Response:
        entry, body, body_len = await record(request)
        wire = WIRES[request.url.path]
        anthropic = wire is anthropic_messages
        if not authorized(request):
            return _error(anthropic, 401, "invalid api key", "invalid_api_key")
        if not isinstance(body, dict):
            return _error(anthropic, 400, "request body must be a JSON object", "invalid_body")
        model = body.get("model")
        if model not in models:
            message = f"The model `{model}` does not exist"
            return _error(anthropic, 404, message, "model_not_found")
        events, tools = wire.parse(body)
        reply = plan(events, tools, find_images(body))
        call = reply.tool_call
        if reply.fail:
            answer: dict = {"error": reply.fail[0]}
        elif len(reply.tool_calls) > 1:
            answer = {
                "tools": [{"tool": c.name, "arguments": c.arguments} for c in reply.tool_calls]
            }
        elif call:
            answer = {"tool": call.name, "arguments": call.arguments}
        else:
            answer = {"text": reply.text}
        recorder.update(entry, script=reply.script, step=reply.step, answer=answer)
        if reply.sleep and not await _hang(request, reply.sleep):
            return Response(status_code=503)  # client gone or server stopping
        if reply.fail:
            status, message = reply.fail
            return _echoing(_error(anthropic, status, message, "scripted_failure"), api_key)
        if not body.get("stream"):
            return JSONResponse(wire.render(reply, model, body_len))
        if wire is openai_chat:
            options = body.get("stream_options") or {}
            events_iter = wire.stream(reply, model, body_len, bool(options.get("include_usage")))
        else:
            events_iter = wire.stream(reply, model, body_len)
        headers = {"cache-control": "no-cache"}
        guarded = _until_closing(request, events_iter)
        return StreamingResponse(guarded, media_type="text/event-stream", headers=headers)

    async def embed(request: Request) -> Response:
        _, body, _ = await record(request)
        if not authorized(request):
            return _error(False, 401, "invalid api key", "invalid_api_key")
        if (why := embeddings.invalid(body)) is not None:
            return _error(False, 400, why, "invalid_body")
        assert isinstance(body, dict)
        if body.get("model") not in embeddings.EMBEDDING_MODELS:
            message = f"The model `{body.get('model')}` does not exist"
            return _error(False, 404, message, "model_not_found")
        return JSONResponse(embeddings.render(body))

    async def count_tokens(request: Request) -> Response:
        *_, body_len = await record(request)
        if not authorized(request):
            return _error(True, 401, "invalid api key", "invalid_api_key")
        return JSONResponse({"input_tokens": max(1, body_len // 4)})

    async def get_requests(request: Request) -> Response:
        return JSONResponse(recorder.entries())

    async def reset(request: Request) -> Response:
        recorder.clear()
        return JSONResponse({"ok": True})

    async def not_found(request: Request) -> Response:
        await record(request)
        anthropic = "anthropic-version" in request.headers
        if chat_only and request.url.path.startswith("/v1/") and not authorized(request):
            # Like vLLM's --api-key: every /v1 path checks the key before routing.
            return _error(anthropic, 401, "invalid api key", "invalid_api_key")
        return _error(anthropic, 404, f"no route {request.url.path}", "not_found")

    served = ["/v1/chat/completions"] if chat_only else list(WIRES)
    routes = [
        *(() if chat_only else (Route("/v1/models", list_models, methods=["GET"]),)),
        *(Route(path, generate, methods=["POST"]) for path in served),
        # A bare Chat server (chat_only) has no embeddings route either.
        *(() if chat_only else (Route("/v1/embeddings", embed, methods=["POST"]),)),
        *(
            ()
            if chat_only
            else (Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),)
        ),
        Route("/_scripted/requests", get_requests, methods=["GET"]),
        Route("/_scripted/reset", reset, methods=["POST"]),
        Route("/{path:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]
    app = Starlette(routes=routes)
    app.state.recorder = recorder
    app.state.required_headers = required  # changed in place by RunningProvider.require_headers
    app.state.closing = False  # set by RunningProvider.stop() to end SLEEPs early
    return app
