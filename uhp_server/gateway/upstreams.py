"""The model providers behind the gateway, configured only from the server's settings."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from uhp_server.settings import Settings

log = logging.getLogger(__name__)

ANTHROPIC_VERSION = "2023-06-01"
FAILURE_CACHE_SECONDS = 5.0  # short, so a recovered upstream is seen again soon


def new_http_client() -> httpx.AsyncClient:
    """The client the gateway shares: no read timeout, since a model may think for minutes
    between two streamed events; connecting must still be quick."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=10.0, read=None, write=60.0, pool=10.0),
        follow_redirects=False,  # a redirect could carry the real key to another host
    )


@dataclass(frozen=True)
class Upstream:
    """One provider. base_url is the API root that endpoint paths are appended to: it ends
    in /v1 for Anthropic (normalised) and is OPENAI_BASE_URL as configured for OpenAI."""

    backend: str  # "openai" | "anthropic"
    base_url: str
    api_key: str = field(repr=False)
    default_model: str | None = None

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def auth_headers(self) -> dict[str, str]:
        if self.backend == "anthropic":
            return {"x-api-key": self.api_key}
        return {"authorization": f"Bearer {self.api_key}"}


def _openai_root(base_url: str) -> str:
    # OPENAI_BASE_URL conventionally includes the version (…/v1, or …/v1beta/openai for
    # compatible providers), so it is used as given.
    return base_url.strip().rstrip("/")


def _anthropic_root(base_url: str) -> str:
    # ANTHROPIC_BASE_URL conventionally omits /v1 (the SDK appends it); accept both.
    root = base_url.strip().rstrip("/")
    return root if root.endswith("/v1") else f"{root}/v1"


def upstream_from_settings(settings: Settings, backend: str) -> Upstream | None:
    if backend == "openai" and settings.openai_api_key:
        return Upstream(
            "openai",
            _openai_root(settings.openai_base_url),
            settings.openai_api_key,
            settings.openai_default_model or None,
        )
    if backend == "anthropic" and settings.anthropic_api_key:
        return Upstream(
            "anthropic",
            _anthropic_root(settings.anthropic_base_url),
            settings.anthropic_api_key,
            settings.anthropic_default_model or None,
        )
    return None


class Upstreams:
    """The configured upstreams plus the one HTTP client every gateway request shares."""

    def __init__(
        self,
        settings: Settings,
        http_client: httpx.AsyncClient | None = None,
        *,
        failure_cache_seconds: float = FAILURE_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._owns_client = http_client is None
        self.http = http_client or new_http_client()
        self._failure_ttl = failure_cache_seconds
        self._clock = clock
        self._upstreams = {
            b: u for b in ("openai", "anthropic") if (u := upstream_from_settings(settings, b))
        }
        self._models: dict[str, tuple[float, list[str] | None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def get(self, backend: str) -> Upstream | None:
        """The upstream of `backend`, or None when no key is configured for it."""
        return self._upstreams.get(backend)

    async def list_models(self, backend: str) -> list[str] | None:
        """Model ids the upstream lists; None when unconfigured, unreachable or refusing."""
        upstream = self.get(backend)
        if upstream is None:
            return None
        cached = self._models.get(backend)
        if cached and cached[0] > self._clock():
            return cached[1]
        # One fetch at a time per backend, so a burst of callers makes one upstream call.
        async with self._locks.setdefault(backend, asyncio.Lock()):
            cached = self._models.get(backend)
            if cached and cached[0] > self._clock():
                return cached[1]
            models = await self._fetch_models(upstream)
            ttl = self._settings.models_cache_seconds if models is not None else self._failure_ttl
            self._models[backend] = (self._clock() + ttl, models)
            return models

    async def default_model(self, backend: str) -> str | None:
        upstream = self.get(backend)
        if upstream is None:
            return None
        if upstream.default_model:
            return upstream.default_model
        models = await self.list_models(backend)
        return models[0] if models else None

    async def aclose(self) -> None:
        if self._owns_client:
            await self.http.aclose()

    async def _fetch_models(self, upstream: Upstream) -> list[str] | None:
        headers = {"accept": "application/json", **upstream.auth_headers()}
        params = {}
        if upstream.backend == "anthropic":
            headers["anthropic-version"] = ANTHROPIC_VERSION
            params["limit"] = "1000"  # Anthropic pages 20 at a time by default
        try:
            resp = await self.http.get(
                upstream.url("models"), headers=headers, params=params, timeout=15.0
            )
        except httpx.HTTPError as exc:
            log.warning("listing %s models failed: %s", upstream.backend, type(exc).__name__)
            return None
        if not resp.is_success:
            log.warning("listing %s models: upstream status %d", upstream.backend, resp.status_code)
            return None
        try:
            data = resp.json()["data"]
            return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]
        except (ValueError, KeyError, TypeError):
            log.warning("listing %s models: unexpected response shape", upstream.backend)
            return None
