"""The gateway's HTTP routes: check the turn token, swap in the real key, stream through.

A call goes to the turn's provider (a configured one, or a per-turn model connection). When
the API the CLI speaks (its wire, read from the path: paths.route) is one the provider serves,
bytes pass through untouched; otherwise gateway/wires translates the request, the answer
(streamed chunk by chunk as it arrives, or whole) and the provider's errors (status and retry
headers kept, the body in the shape the CLI parses). What differs from one wire to another is
asked of its Wire object, never decided here by its name.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from harness_bases.messages import PROVIDER_REFUSED, safe_message
from uhp_server.gateway import paths
from uhp_server.gateway.confine import Confined, confine
from uhp_server.gateway.providers import Provider, provider_secrets
from uhp_server.gateway.replies import (
    STREAM_HEADERS,
    bad_gateway,
    bad_request,
    credential_refused,
    models_answer,
    not_found,
    too_large,
    unauthorized,
)
from uhp_server.gateway.scrubbing import Scrubber, StreamScrubber, scrubber
from uhp_server.gateway.tokens import DOOR_SCOPE_KEY, TokenRegistry, TurnGrant
from uhp_server.gateway.unreachable import refused_address_message, unreachable_message
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.gateway.url_policy import PinnedUrl, UrlRefused, pin_url
from uhp_server.gateway.usage import UsageExtractor
from uhp_server.gateway.wires import (
    CallKind,
    StreamTranslator,
    Translation,
    Untranslatable,
    Wire,
    WireHeaders,
    backends,
    wires,
)
from uhp_server.gateway.wires import translation as find_translation
from uhp_server.http.bodies import read_capped
from uhp_server.ops.metrics import CONNECTION_MODEL, Metrics

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_ERROR_BODY = 1024 * 1024
MAX_RESPONSE_BODY = 64 * 1024 * 1024  # a whole (non-streamed) answer that is translated

# Chat Completions' two names for the output cap.
_TOKEN_CAPS = (("max_tokens", "max_completion_tokens"), ("max_completion_tokens", "max_tokens"))

# What passes between a CLI and a provider besides the body: these, and each wire's own
# (Wire.headers), whichever wire a call speaks.
_FORWARD_REQUEST_HEADERS = (
    "content-type",
    "accept",
    "user-agent",
    "idempotency-key",
    "x-stainless-retry-count",
)
_FORWARD_RESPONSE_HEADERS = (
    "content-type",
    "retry-after(-ms)?",
    "x-request-id",
    "request-id",
    "x-should-retry",
    "x-ratelimit-.*",
)


def _wires_headers(which: Callable[[WireHeaders], tuple[str, ...]]) -> tuple[str, ...]:
    """One kind of header of every wire, in rank order, each once."""
    return tuple(dict.fromkeys(h for wire in wires().values() for h in which(wire.headers)))


def _token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    found = (request.headers.get(name) for name in _wires_headers(lambda h: h.token))
    return next((value for value in found if value), None)


def _upstream_headers(
    request: Request, provider: Provider, translated: bool, pinned: PinnedUrl | None
) -> dict[str, str]:
    if translated:  # the caller's wire-specific headers mean nothing to another API
        headers = {
            "content-type": "application/json",
            "accept": request.headers.get("accept", "*/*"),
        }
    else:
        names = _FORWARD_REQUEST_HEADERS + _wires_headers(lambda h: h.forwarded)
        headers = {k: v for k in names if (v := request.headers.get(k))}
    for name, value in provider.served.version_headers.items():
        headers.setdefault(name, value)
    if pinned is not None:
        headers["host"] = pinned.host_header
    # Uncompressed bytes, so usage can be read from them as they pass.
    headers["accept-encoding"] = "identity"
    headers.update(provider.headers)
    headers.update(provider.auth_headers())  # last: nothing the caller sent can override it
    return headers


def _response_headers(
    resp: httpx.Response, scrub: Scrubber, translated: bool = False
) -> dict[str, str]:
    """The upstream headers the CLI gets, scrubbed as the body is: a provider may echo what
    it was sent in one (a request id, a debug header)."""
    relayed = "|".join(_FORWARD_RESPONSE_HEADERS + _wires_headers(lambda h: h.relayed))
    headers = {k: scrub.scrub_text(v) for k, v in resp.headers.items() if re.fullmatch(relayed, k)}
    if translated:
        headers.pop("content-type", None)  # the translated body has its own
    return {**headers, **STREAM_HEADERS}


async def _relay(
    resp: httpx.Response,
    extractor: UsageExtractor,
    backend: str,
    scrub: Scrubber,
    translator: StreamTranslator | None = None,
) -> AsyncIterator[bytes]:
    scrubbing = StreamScrubber(scrub)  # before anything reads the bytes, translation included

    def passed(chunk: bytes) -> bytes:
        extractor.feed(chunk)  # before yielding: usage is recorded when the client sees it
        return translator.feed(chunk) if translator else chunk

    try:
        async for chunk in resp.aiter_bytes():
            if out := passed(scrubbing.feed(chunk)):
                yield out
        if out := passed(scrubbing.finish()):
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


def _scrubber(provider: Provider, upstreams: Upstreams) -> Scrubber:
    """What never reaches the sandbox, in any encoding (scrubbing.py): the provider's key and
    header values (a run token), and every configured provider's, whichever serves the call."""
    return scrubber(upstreams.secrets, provider_secrets(provider))


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
    scrub: Scrubber,
    wire: Wire,
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
        return credential_refused(wire)
    body = scrub.scrub(body)
    headers = _response_headers(resp, scrub, translated=translation is not None)
    if translation is not None:
        body = translation.error(resp.status_code, body)
        headers["content-type"] = "application/json"
    return Response(body, status_code=resp.status_code, headers=headers)


def refusal_message(body: bytes) -> str:
    """What a client may read of a provider's refusal: the error's own message (OpenAI's and
    Anthropic's `error.message`, Gemini's too) unless it names a host, address or path."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    error = answer.get("error") if isinstance(answer, dict) else None
    said = error.get("message") if isinstance(error, dict) else None
    return safe_message(said if isinstance(said, str) else None, PROVIDER_REFUSED)


async def _translated_answer(
    resp: httpx.Response, translation: Translation, extractor: UsageExtractor, scrub: Scrubber
) -> Response:
    """A whole (non-streamed) upstream answer, translated into the CLI's wire."""
    raw = scrub.scrub(await _read_body(resp, MAX_RESPONSE_BODY))
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
    headers = {
        **_response_headers(resp, scrub, translated=True),
        "content-type": "application/json",
    }
    body = json.dumps(translation.response(upstream), ensure_ascii=False).encode()
    return Response(body, status_code=resp.status_code, headers=headers)


def _answers_models_itself(backend: str, provider: Provider) -> bool:
    """A static list, or a models route in another backend's shape: the gateway answers."""
    return provider.models is not None or provider.backend != backend


def _translation_for(wire: Wire, provider: Provider) -> Translation | None:
    """None: pass through. ValueError: the provider cannot serve this wire."""
    return find_translation(wire.name, provider.upstream_api(wire.name))


def _request_body(
    route: paths.Route,
    raw: bytes,
    model: str,
    provider: Provider,
    translation: Translation | None,
) -> tuple[bytes, bool] | Response:
    """The upstream body and whether the caller asked for a stream; or the refusal."""
    wire, call = route.wire, route.call
    if not raw.strip() and translation is None:
        return raw, False
    try:
        obj = json.loads(raw) if raw.strip() else {}
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return bad_request(wire, translation, "Request body must be a JSON object.")
    if call is not None and call.streams:
        obj["stream"] = True  # what every other wire says in its body
    stream = bool(obj.get("stream"))
    if call is not None:  # a model call (or its token count): nothing past the sandbox
        try:
            obj = confine(wire.name, obj)
        except Confined as exc:
            return bad_request(wire, translation, str(exc))
    if translation is not None:
        try:
            obj = translation.request(obj, model=model)
        except Untranslatable as exc:
            return bad_request(wire, translation, exc.message)
    if "model" in obj or (call is not None and call.model_in_body):
        obj["model"] = model  # only the top-level key: the model that runs is the turn's
    if call is not None and provider.generation:
        obj.update(provider.generation)
        for cap, other in _TOKEN_CAPS:  # one cap, not two that disagree
            if cap in provider.generation and other not in provider.generation:
                obj.pop(other, None)
    try:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate (json.loads takes "\ud800")
        return bad_request(wire, translation, "The body holds an unpaired surrogate.")
    return body, stream


async def _count_tokens(request: Request, wire: Wire, translation: Translation) -> Response:
    """Token counting has no Chat Completions counterpart: the translation's estimate."""
    count = getattr(translation, "count_tokens", None)
    if count is None:
        return not_found(wire)
    raw = await read_capped(request, MAX_REQUEST_BYTES)
    if raw is None:
        return too_large(wire)
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return bad_request(wire, translation, "Request body must be a JSON object.")
    return JSONResponse(count(body), headers=STREAM_HEADERS)


async def forward(
    backend: str,
    path: str,
    request: Request,
    tokens: TokenRegistry,
    upstreams: Upstreams,
    metrics: Metrics | None = None,
) -> Response:
    route = paths.route(backend, path)
    wire, call = route.wire, route.call  # the CLI's wire: every answer is in its shape
    token = _token(request)
    grant: TurnGrant | None = (
        tokens.get(token, request.scope.get(DOOR_SCOPE_KEY)) if token else None
    )
    if grant is None or grant.backend != backend:
        return unauthorized(wire)
    if not route.allowed or (call is not None and call.model_in_body and request.method != "POST"):
        return not_found(wire)
    if grant.model_paused:
        return bad_gateway(wire, "The agent is waiting for the user; no model call now.")
    provider: Provider | None = grant.provider or upstreams.get(backend)
    if provider is None:
        log.error("gateway %s: a token was issued but no provider is configured", backend)
        return bad_gateway(wire, "The model provider is not configured.")

    if call is None and wire.as_api is None:  # no provider lists models this wire's way
        if request.method != "GET":
            return not_found(wire)
        return models_answer(wire, path, grant.model, provider.name)
    if call is None and _answers_models_itself(backend, provider):
        return models_answer(wire, path, grant.model, provider.name)
    try:
        translation = _translation_for(wire, provider) if call is not None else None
    except ValueError:
        log.error(
            "gateway %s: provider %s cannot serve the %s API", backend, provider.name, wire.name
        )
        return bad_gateway(wire, "The model provider does not serve this agent's API.")
    if translation is not None and call is not None:
        if call.kind is CallKind.COUNT_TOKENS:
            return await _count_tokens(request, wire, translation)
        if call.kind is not CallKind.ANSWER or request.method != "POST":
            return not_found(wire)  # e.g. compaction: the provider's API has no equivalent
    upstream_path = translation.upstream_path if translation is not None else path

    body, stream = b"", False
    if request.method == "POST":
        raw = await read_capped(request, MAX_REQUEST_BYTES)
        if raw is None:
            return too_large(wire)
        prepared = _request_body(route, raw, grant.model, provider, translation)
        if isinstance(prepared, Response):
            return prepared
        body, stream = prepared

    url, pinned = provider.url(upstream_path), None
    if provider.allow_private is not None:  # a per-turn connection: policy on every call
        try:
            pinned = await pin_url(url, provider.allow_private)
        except UrlRefused as exc:
            log.warning("gateway %s: model connection refused by the URL policy: %s", backend, exc)
            return bad_gateway(wire, refused_address_message(exc))
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
        return bad_gateway(wire, unreachable_message(exc))

    if metrics is not None:
        metrics.gateway_call(provider.name, model_label, resp.status_code)
    scrub = _scrubber(provider, upstreams)
    if not resp.is_success:
        missing_model = _missing_model_hook(upstreams, provider, grant)
        answer = await _error_response(resp, provider, scrub, wire, translation, missing_model)
        if call is not None:
            grant.provider_refusal = refusal_message(bytes(answer.body))
        return answer
    if call is not None:
        grant.provider_refusal = None
    on_usage = (
        None
        if metrics is None
        else lambda tokens: metrics.gateway_usage(provider.name, model_label, tokens)
    )
    extractor = UsageExtractor(
        provider.served, resp.headers.get("content-type", ""), grant.usage, on_usage=on_usage
    )
    if translation is not None and not stream:
        return await _translated_answer(resp, translation, extractor, scrub)
    translator = translation.stream() if translation is not None else None
    headers = _response_headers(resp, scrub, translated=translator is not None)
    if translator is not None:
        headers["content-type"] = translator.content_type
    return StreamingResponse(
        _relay(resp, extractor, backend, scrub, translator),
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
    """A route per backend of the registered wires: /gateway/openai/v1/...,
    /gateway/anthropic/v1/... (see paths.py)."""
    router = APIRouter(include_in_schema=False)

    def serve(backend: str) -> Callable[[str, Request], Awaitable[Response]]:
        async def gateway(path: str, request: Request) -> Response:
            return await forward(backend, path, request, tokens, upstreams, metrics)

        return gateway

    for backend in backends():
        router.add_api_route(
            f"{paths.mount(backend)}/{{path:path}}",
            serve(backend),
            methods=["GET", "POST"],
            name=f"{backend}_gateway",
        )
    return router
