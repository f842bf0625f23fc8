"""The model providers behind the gateway and what each serves right now.

`available` is measured, never asserted. A provider with a models route: the models it lists
now. A provider with a static model list (UHP_OPENAI_MODELS, `models:` in the providers file,
for endpoints without a models route): that list, while the provider answered a probe of its
models route (any HTTP answer but 401/403/5xx: a bare Chat Completions server answers 404)
within UHP_MODELS_CACHE_SECONDS. Both cached; a failure only briefly.

Per model, the gateway's real traffic corrects either: a provider that answers a model call
with "this model does not exist" has that model left out for UHP_MODELS_CACHE_SECONDS
(`mark_missing`). That costs nothing when all is well, where probing each model of a static
list would cost a paid model call per model per cache period.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
from collections.abc import Callable

import httpx

from uhp_server.gateway.providers import Provider, provider_secrets
from uhp_server.gateway.providers_file import load_providers
from uhp_server.gateway.scrubbing import IN_USE
from uhp_server.settings import Settings

log = logging.getLogger(__name__)

FAILURE_CACHE_SECONDS = 5.0  # short, so a recovered upstream is seen again soon


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default verification, built once per process: loading the CA bundle costs
    tens of milliseconds, paid again by every app built in one process otherwise."""
    return httpx.create_ssl_context()


def new_http_client() -> httpx.AsyncClient:
    """The client the gateway shares: no read timeout, since a model may think for minutes
    between two streamed events; connecting must still be quick."""
    return httpx.AsyncClient(
        verify=_tls_context(),
        timeout=httpx.Timeout(connect=10.0, read=None, write=60.0, pool=10.0),
        follow_redirects=False,  # a redirect could carry the real key to another host
    )


class Upstreams:
    """The configured providers, what each serves now, and the one HTTP client every gateway
    request shares."""

    def __init__(
        self,
        settings: Settings,
        http_client: httpx.AsyncClient | None = None,
        *,
        failure_cache_seconds: float = FAILURE_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._owns_client = http_client is None
        self.http = http_client or new_http_client()
        self._failure_ttl = failure_cache_seconds
        self._clock = clock
        self.providers: dict[str, Provider] = {p.name: p for p in load_providers(settings)}
        # The operator's credentials (keys, header values): redacted from whatever the gateway
        # relays, whichever provider serves the call (gateway/scrubbing.py).
        self.secrets: tuple[str, ...] = tuple(
            secret for p in self.providers.values() for secret in provider_secrets(p)
        )
        IN_USE.add(self.secrets)  # (for the process's life: a key set once stays secret)
        self._models: dict[str, tuple[float, list[str] | None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # (provider, model) -> until when: models the provider said it does not have.
        self._missing: dict[tuple[str, str], float] = {}

    def get(self, name: str) -> Provider | None:
        """The provider called `name` ("openai", "anthropic" or a providers-file name)."""
        return self.providers.get(name)

    def mark_missing(self, name: str, model: str) -> None:
        """The provider answered a call for `model` with "no such model": leave it out of the
        listings for a cache period (so the catalogue falls back instead of failing again)."""
        if (name, model) not in self._missing or self._missing[(name, model)] <= self._clock():
            log.warning("provider %s does not serve model %s: listed unavailable", name, model)
        self._missing[(name, model)] = self._clock() + self.settings.models_cache_seconds

    async def list_models(self, name: str) -> list[str] | None:
        """The models the provider serves now; None when unknown, unreachable or refusing."""
        models = await self._listed(name)
        if models is None:
            return None
        now = self._clock()
        return [m for m in models if self._missing.get((name, m), now) <= now]

    async def _listed(self, name: str) -> list[str] | None:
        upstream = self.get(name)
        if upstream is None:
            return None
        cached = self._models.get(name)
        if cached and cached[0] > self._clock():
            return cached[1]
        # One fetch at a time per provider, so a burst of callers makes one upstream call.
        async with self._locks.setdefault(name, asyncio.Lock()):
            cached = self._models.get(name)
            if cached and cached[0] > self._clock():
                return cached[1]
            models = await self._fetch_models(upstream)
            ttl = self.settings.models_cache_seconds if models is not None else self._failure_ttl
            self._models[name] = (self._clock() + ttl, models)
            return models

    async def default_model(self, name: str) -> str | None:
        upstream = self.get(name)
        if upstream is None:
            return None
        if upstream.default_model:
            return upstream.default_model
        if upstream.models:
            return upstream.models[0]
        models = await self.list_models(name)
        return models[0] if models else None

    async def aclose(self) -> None:
        if self._owns_client:
            await self.http.aclose()

    async def _fetch_models(self, upstream: Provider) -> list[str] | None:
        headers = {"accept": "application/json", **upstream.headers, **upstream.auth_headers()}
        headers.update(upstream.served.version_headers)
        params = dict(upstream.served.models_query)
        try:
            resp = await self.http.get(
                upstream.url("models"), headers=headers, params=params, timeout=15.0
            )
        except httpx.HTTPError as exc:
            log.warning("listing %s models failed: %s", upstream.name, type(exc).__name__)
            return None
        if upstream.models is not None:
            return _probed(upstream, resp.status_code)
        if not resp.is_success:
            log.warning("listing %s models: upstream status %d", upstream.name, resp.status_code)
            return None
        try:
            data = resp.json()["data"]
            return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]
        except (ValueError, KeyError, TypeError):
            log.warning("listing %s models: unexpected response shape", upstream.name)
            return None


def _probed(upstream: Provider, status: int) -> list[str] | None:
    """A static list is served while the provider answers and accepts the key."""
    if status in (401, 403) or status >= 500:
        log.warning("probing %s: upstream status %d", upstream.name, status)
        return None
    return list(upstream.models or ())
