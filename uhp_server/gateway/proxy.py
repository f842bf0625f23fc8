"""The gateway's HTTP routes: check the turn token, swap in the real key, stream through.

A call goes to the turn's provider (a configured one, or a per-turn model connection). When
the API the CLI speaks (its wire, read from the path) is one the provider serves, bytes pass
through untouched; otherwise gateway/wires translates the request, the answer (streamed chunk
by chunk as it arrives, or whole) and the provider's errors (status and retry headers kept,
the body in the shape the CLI parses).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Callable

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from uhp_server.bodies import read_capped
from uhp_server.gateway.confine import Confined, confine
from uhp_server.gateway.providers import ANTHROPIC_VERSION, Provider
from uhp_server.gateway.replies import (
    STREAM_HEADERS,
    bad_gateway,
    bad_request,
    credential_refused,
    gemini_models_answer,
    models_answer,
    not_found,
    unauthorized,
    wire_error,
)
from uhp_server.gateway.tokens import DOOR_SCOPE_KEY, TokenRegistry, TurnGrant
from uhp_server.gateway.unreachable import refused_address_message, unreachable_message
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.gateway.url_policy import PinnedUrl, UrlRefused, pin_url
from uhp_server.gateway.usage import UsageExtractor
from uhp_server.gateway.wires import StreamTranslator, Translation, Untranslatable
from uhp_server.gateway.wires import translation as find_translation
from uhp_server.metrics import CONNECTION_MODEL, Metrics

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_ERROR_BODY = 1024 * 1024
MAX_RESPONSE_BODY = 64 * 1024 * 1024  # a whole (non-streamed) answer that is translated

# Endpoints an agent needs, relative to the API root. Anything else is 404, so a token can
# never reach files, batches, fine-tuning, admin endpoints or what the account stored (a
# response by id, its cancel) with the server's key.
_ALLOWED = {
    "openai": re.compile(
        r"responses|responses/compact|chat/completions|models(/.+)?"
        r"|v1beta/models(/.+)?"  # model ids may hold "/" and ":" (org/name, name:tag)
    ),
    "anthropic": re.compile(r"messages|messages/count_tokens|models(/.+)?"),
}
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@~-]*")  # no "", ".", "..", "%", "?", "#"
# POSTs to these always run the turn's model, even when the body names none.
_MODEL_ENDPOINTS = {
    "responses",
    "responses/compact",
    "chat/completions",
    "messages",
    "messages/count_tokens",
}
_TRANSLATED_PATHS = {"responses", "messages"}  # the model calls a translation carries
# The Gemini API (Gemini CLI) under the openai backend: its SDK appends `v1beta/models/…` to
# the gateway's base URL. It names the model and whether to stream in the path.
_GEMINI_ROOT = "v1beta/"
_GEMINI_CALL = re.compile(r"v1beta/models/.+:(generateContent|streamGenerateContent)")
_COUNT_TOKENS = re.compile(r"messages/count_tokens|v1beta/models/.+:countTokens")
# Chat Completions' two names for the output cap.
_TOKEN_CAPS = (("max_tokens", "max_completion_tokens"), ("max_completion_tokens", "max_tokens"))

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


def _token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or request.headers.get("x-goog-api-key") or None


def _path_allowed(backend: str, path: str) -> bool:
    segments = path.split("/")
    return bool(_ALLOWED[backend].fullmatch(path)) and all(_SEGMENT.fullmatch(s) for s in segments)


def _wire_of(backend: str, path: str) -> str | None:
    """The API a request speaks, from its path; None for the models routes."""
    if path.startswith(_GEMINI_ROOT):
        model_call = _GEMINI_CALL.fullmatch(path) or _COUNT_TOKENS.fullmatch(path)
        return "gemini" if model_call else None
    if path.startswith("models"):
        return None
    if backend == "anthropic":
        return "anthropic"
    return "chat" if path == "chat/completions" else "responses"


def _upstream_headers(
    request: Request, provider: Provider, translated: bool, pinned: PinnedUrl | None
) -> dict[str, str]:
    if translated:  # the caller's wire-specific headers mean nothing to another API
        headers = {
            "content-type": "application/json",
            "accept": request.headers.get("accept", "*/*"),
        }
    else:
        headers = {k: v for k in _FORWARD_REQUEST_HEADERS if (v := request.headers.get(k))}
    if provider.api == "anthropic":
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
    if pinned is not None:
        headers["host"] = pinned.host_header
    # Uncompressed bytes, so usage can be read from them as they pass.
    headers["accept-encoding"] = "identity"
    headers.update(provider.headers)
    headers.update(provider.auth_headers())  # last: nothing the caller sent can override it
    return headers


def _response_headers(resp: httpx.Response, translated: bool = False) -> dict[str, str]:
    headers = {k: v for k, v in resp.headers.items() if _FORWARD_RESPONSE_HEADERS.fullmatch(k)}
    if translated:
        headers.pop("content-type", None)  # the translated body has its own
    return {**headers, **STREAM_HEADERS}


async def _relay(
    resp: httpx.Response,
    extractor: UsageExtractor,
    backend: str,
    translator: StreamTranslator | None = None,
) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.aiter_bytes():
            extractor.feed(chunk)  # before yielding: usage is recorded when the client sees it
            out = translator.feed(chunk) if translator else chunk
            if out:
                yield out
        extractor.finish()
        if translator and (tail := translator.finish()):
            yield tail
    except httpx.HTTPError as exc:
        # Headers are already sent; ending the body early is what the client will notice.
        log.warning("gateway %s: upstream stream broke: %s", backend, type(exc).__name__)
    finally:
        await resp.aclose()


async def _read_body(resp: httpx.Response, limit: int) -> bytes:
    body = b""
    try:
        async for chunk in resp.aiter_bytes():
            body += chunk
            if len(body) > limit:
                break
    except httpx.HTTPError:
        body = b""
    finally:
        await resp.aclose()
    return body


def _scrub(body: bytes, provider: Provider) -> bytes:
    """Never echo the provider's key or header values (a run token) back to the sandbox."""
    for secret in (provider.api_key, *provider.headers.values()):
        if len(secret) >= 8:
            body = body.replace(secret.encode(), b"[redacted]")
    return body


def says_model_missing(status: int, body: bytes) -> bool:
    """Whether an upstream error says the requested model does not exist. Providers word it
    differently (OpenAI: code model_not_found; vLLM: "The model `x` does not exist"; Ollama:
    'model "x" not found'; Anthropic: not_found_error "model: x"), all with 404 or 400."""
    if status not in (400, 404):
        return False
    text = body[:MAX_ERROR_BODY].decode("utf-8", "replace").lower()
    if "model_not_found" in text:
        return True
    return "model" in text and (
        "does not exist" in text
        or "not found" in text
        or (status == 404 and "not_found_error" in text)
    )


async def _error_response(
    resp: httpx.Response,
    provider: Provider,
    backend: str,
    translation: Translation | None,
    on_missing_model: Callable[[], None] | None = None,
) -> Response:
    """An upstream error, its status and retry headers kept, in the CLI's own shape."""
    body = await _read_body(resp, MAX_ERROR_BODY)
    if on_missing_model is not None and says_model_missing(resp.status_code, body):
        on_missing_model()
    if resp.status_code in (401, 403):
        log.error(
            "gateway: provider %s refused the credential (%d)", provider.name, resp.status_code
        )
        return credential_refused(backend)
    body = _scrub(body, provider)
    headers = _response_headers(resp, translated=translation is not None)
    if translation is not None:
        body = translation.error(resp.status_code, body)
        headers["content-type"] = "application/json"
    return Response(body, status_code=resp.status_code, headers=headers)


async def _translated_answer(
    resp: httpx.Response, translation: Translation, extractor: UsageExtractor
) -> Response:
    """A whole (non-streamed) upstream answer, translated into the CLI's wire."""
    raw = await _read_body(resp, MAX_RESPONSE_BODY)
    extractor.feed(raw)
    extractor.finish()
    try:
        upstream = json.loads(raw)
    except ValueError:
        upstream = None
    if not isinstance(upstream, dict):
        return Response(
            translation.refusal(502, "The model provider answered with a malformed body."),
            status_code=502,
            headers={**STREAM_HEADERS, "content-type": "application/json"},
        )
    headers = {**_response_headers(resp, translated=True), "content-type": "application/json"}
    body = json.dumps(translation.response(upstream), ensure_ascii=False).encode()
    return Response(body, status_code=resp.status_code, headers=headers)


def _answers_models_itself(backend: str, provider: Provider) -> bool:
    return provider.models is not None or provider.backend != backend


def _translation_for(wire: str, provider: Provider) -> Translation | None:
    """None: pass through. ValueError: the provider cannot serve this wire."""
    return find_translation(wire, provider.upstream_api(wire))


def _request_body(
    backend: str,
    raw: bytes,
    path: str,
    model: str,
    provider: Provider,
    translation: Translation | None,
) -> tuple[bytes, bool] | Response:
    """The upstream body and whether the caller asked for a stream; or the refusal."""
    if not raw.strip() and translation is None:
        return raw, False
    try:
        obj = json.loads(raw) if raw.strip() else {}
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return bad_request(backend, translation, "Request body must be a JSON object.")
    if path.endswith(":streamGenerateContent"):
        obj["stream"] = True  # what every other wire says in its body
    stream = bool(obj.get("stream"))
    wire = _wire_of(backend, path)
    if wire is not None:  # a model call (or its token count): nothing past the sandbox
        try:
            obj = confine(wire, obj)
        except Confined as exc:
            return bad_request(backend, translation, str(exc))
    if translation is not None:
        try:
            obj = translation.request(obj, model=model)
        except Untranslatable as exc:
            return bad_request(backend, translation, exc.message)
    if "model" in obj or path in _MODEL_ENDPOINTS:
        obj["model"] = model  # only the top-level key: the model that runs is the turn's
    model_call = path in _MODEL_ENDPOINTS or bool(_GEMINI_CALL.fullmatch(path))
    if model_call and provider.generation:
        obj.update(provider.generation)
        for cap, other in _TOKEN_CAPS:  # one cap, not two that disagree
            if cap in provider.generation and other not in provider.generation:
                obj.pop(other, None)
    try:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate (json.loads takes "\ud800")
        return bad_request(backend, translation, "The body holds an unpaired surrogate.")
    return body, stream


async def _count_tokens(request: Request, backend: str, translation: Translation) -> Response:
    """Token counting has no Chat Completions counterpart: the translation's estimate."""
    count = getattr(translation, "count_tokens", None)
    if count is None:
        return not_found(backend)
    raw = await read_capped(request, MAX_REQUEST_BYTES)
    if raw is None:
        return wire_error(backend, 413, "Request body too large.", "invalid_request_error")
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return bad_request(backend, translation, "Request body must be a JSON object.")
    return JSONResponse(count(body), headers=STREAM_HEADERS)


async def forward(
    backend: str,
    path: str,
    request: Request,
    tokens: TokenRegistry,
    upstreams: Upstreams,
    metrics: Metrics | None = None,
) -> Response:
    replies_as = "gemini" if path.startswith(_GEMINI_ROOT) else backend  # the error shape
    token = _token(request)
    grant: TurnGrant | None = (
        tokens.get(token, request.scope.get(DOOR_SCOPE_KEY)) if token else None
    )
    if grant is None or grant.backend != backend:
        return unauthorized(replies_as)
    if not _path_allowed(backend, path) or (path in _MODEL_ENDPOINTS and request.method != "POST"):
        return not_found(replies_as)
    if grant.model_paused:
        return bad_gateway(replies_as, "The agent is waiting for the user; no model call now.")
    provider: Provider | None = grant.provider or upstreams.get(backend)
    if provider is None:
        log.error("gateway %s: a token was issued but no provider is configured", backend)
        return bad_gateway(replies_as, "The model provider is not configured.")

    wire = _wire_of(backend, path)
    if wire is None and replies_as == "gemini":  # no provider lists models the Gemini way
        if request.method != "GET":
            return not_found(replies_as)
        return gemini_models_answer(grant.model, one=path != "v1beta/models")
    if wire is None and _answers_models_itself(backend, provider):
        return models_answer(backend, provider, grant.model)
    try:
        translation = _translation_for(wire, provider) if wire else None
    except ValueError:
        log.error("gateway %s: provider %s cannot serve the %s API", backend, provider.name, wire)
        return bad_gateway(replies_as, "The model provider does not serve this agent's API.")
    if translation is not None and _COUNT_TOKENS.fullmatch(path):
        return await _count_tokens(request, replies_as, translation)
    translated_call = path in _TRANSLATED_PATHS or _GEMINI_CALL.fullmatch(path)
    if translation is not None and (not translated_call or request.method != "POST"):
        return not_found(replies_as)  # e.g. a stored response: the provider has no equivalent
    upstream_path = translation.upstream_path if translation is not None else path

    body, stream = b"", False
    if request.method == "POST":
        raw = await read_capped(request, MAX_REQUEST_BYTES)
        if raw is None:
            return wire_error(replies_as, 413, "Request body too large.", "invalid_request_error")
        prepared = _request_body(backend, raw, path, grant.model, provider, translation)
        if isinstance(prepared, Response):
            return prepared
        body, stream = prepared

    url, pinned = provider.url(upstream_path), None
    if provider.allow_private is not None:  # a per-turn connection: policy on every call
        try:
            pinned = await pin_url(url, provider.allow_private)
        except UrlRefused as exc:
            log.warning("gateway %s: model connection refused by the URL policy: %s", backend, exc)
            return bad_gateway(replies_as, refused_address_message(exc))
        url = pinned.connect_url
    # Scheme, host and root come only from the provider; the caller adds a checked path + query.
    req = upstreams.http.build_request(
        request.method,
        url,
        params=list(request.query_params.multi_items()) if translation is None else None,
        headers=_upstream_headers(request, provider, translation is not None, pinned),
        content=body if request.method == "POST" else None,
        extensions={"sni_hostname": pinned.host} if pinned else None,
    )
    # A per-turn connection's model name is the client's to choose: one label for them all.
    model_label = CONNECTION_MODEL if provider.allow_private is not None else grant.model
    try:
        resp = await upstreams.http.send(req, stream=True)
    except httpx.HTTPError as exc:
        log.warning(
            "gateway %s: provider %s unreachable: %s", backend, provider.name, type(exc).__name__
        )
        if metrics is not None:
            metrics.gateway_call(provider.name, model_label, None)
        return bad_gateway(replies_as, unreachable_message(exc))

    if metrics is not None:
        metrics.gateway_call(provider.name, model_label, resp.status_code)
    if not resp.is_success:
        return await _error_response(
            resp, provider, replies_as, translation, _missing_model_hook(upstreams, provider, grant)
        )
    on_usage = (
        None
        if metrics is None
        else lambda tokens: metrics.gateway_usage(provider.name, model_label, tokens)
    )
    extractor = UsageExtractor(
        provider.backend, resp.headers.get("content-type", ""), grant.usage, on_usage=on_usage
    )
    if translation is not None and not stream:
        return await _translated_answer(resp, translation, extractor)
    translator = translation.stream() if translation is not None else None
    headers = _response_headers(resp, translated=translator is not None)
    if translator is not None:
        headers["content-type"] = translator.content_type
    return StreamingResponse(
        _relay(resp, extractor, backend, translator),
        status_code=resp.status_code,
        headers=headers,
        background=BackgroundTask(resp.aclose),  # also when the client went away early
    )


def _missing_model_hook(
    upstreams: Upstreams, provider: Provider, grant: TurnGrant
) -> Callable[[], None] | None:
    """Only a configured provider's models are catalogued (not a per-turn connection's)."""
    if upstreams.get(provider.name) is not provider:
        return None
    return functools.partial(upstreams.mark_missing, provider.name, grant.model)


def make_gateway_router(
    tokens: TokenRegistry, upstreams: Upstreams, metrics: Metrics | None = None
) -> APIRouter:
    """Routes for /gateway/openai/v1/... and /gateway/anthropic/v1/... (see paths.py)."""
    router = APIRouter(include_in_schema=False)

    @router.api_route("/gateway/openai/v1/{path:path}", methods=["GET", "POST"])
    async def openai_gateway(path: str, request: Request) -> Response:
        return await forward("openai", path, request, tokens, upstreams, metrics)

    @router.api_route("/gateway/anthropic/v1/{path:path}", methods=["GET", "POST"])
    async def anthropic_gateway(path: str, request: Request) -> Response:
        return await forward("anthropic", path, request, tokens, upstreams, metrics)

    return router
