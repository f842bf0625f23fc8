"""Embeddings from the configured model provider: the `Embedder` memory providers are handed.

The model is `UHP_MEMORY_EMBEDDING_MODEL`, `model` or `provider/model`; a bare model goes to
the first configured provider that speaks an OpenAI-style API (`responses` or `chat`: an
Anthropic provider has no embeddings route). The call is OpenAI's `POST <base>/embeddings`
with the same base URL, key and headers the gateway uses for that provider's model calls, over
the gateway's one HTTP client: the operator's credentials never leave the server, and a memory
provider never reaches a model of its own.

Unset, there is no embedder, and providers say so (`query` absent from their signals). A
provider that answers without vectors (no such route, no such model, a refused key, a
connection failure) makes `embed` raise `EmbeddingsUnavailable`, which a memory provider turns
into `degraded` or `memory_unavailable`: never into a silent empty answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx

from uhp_server.gateway.providers import Provider
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.memories.provider import EmbeddingsUnavailable
from uhp_server.settings import Settings

log = logging.getLogger(__name__)

OPENAI_STYLE_APIS = ("responses", "chat")
# One request embeds at most this many texts (OpenAI's limit is 2048 inputs); more are sent
# in several requests.
BATCH = 256
TIMEOUT = httpx.Timeout(connect=10.0, read=60.0, write=60.0, pool=10.0)


class EmbeddingModelSettingError(ValueError):
    """UHP_MEMORY_EMBEDDING_MODEL names no provider that could serve it (start-up stops)."""


@dataclass
class GatewayEmbedder:
    """`Embedder` (uhp_server/memories/provider.py) over one configured provider."""

    http: httpx.AsyncClient
    provider: Provider
    model: str

    @property
    def destination(self) -> str:
        host = httpx.URL(self.provider.url("embeddings")).host
        return f"the model provider `{self.provider.name}` ({host}), embedding model `{self.model}`"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            vectors += await self._embed_batch(texts[start : start + BATCH])
        return vectors

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        headers = {
            "content-type": "application/json",
            **self.provider.headers,
            **self.provider.auth_headers(),
        }
        body = {"model": self.model, "input": texts}
        where = f"the provider `{self.provider.name}` (embedding model `{self.model}`)"
        try:
            response = await self.http.post(
                self.provider.url("embeddings"), json=body, headers=headers, timeout=TIMEOUT
            )
        except httpx.HTTPError as exc:
            reason = type(exc).__name__
            raise EmbeddingsUnavailable(f"{where} could not be reached ({reason})") from None
        if response.status_code != 200:
            raise EmbeddingsUnavailable(f"{where} answered {response.status_code} to embeddings")
        return _vectors(response, len(texts), where)


def _vectors(response: httpx.Response, count: int, where: str) -> list[list[float]]:
    """The answer's vectors in input order; EmbeddingsUnavailable for anything else."""
    try:
        data = response.json()["data"]
        ordered = sorted(data, key=lambda item: int(item["index"]))
        vectors = [[float(v) for v in item["embedding"]] for item in ordered]
    except (ValueError, KeyError, TypeError):
        raise EmbeddingsUnavailable(f"{where} answered embeddings in an unknown shape") from None
    if len(vectors) != count or len({len(v) for v in vectors}) > 1 or not vectors[0]:
        raise EmbeddingsUnavailable(f"{where} answered {len(vectors)} vectors for {count} texts")
    return vectors


def embedder_for(settings: Settings, upstreams: Upstreams) -> GatewayEmbedder | None:
    """The embedder UHP_MEMORY_EMBEDDING_MODEL configures, or None when it is unset.
    EmbeddingModelSettingError when it names a provider that is not configured or cannot
    embed, or when no configured provider speaks an OpenAI-style API."""
    setting = (settings.memory_embedding_model or "").strip()
    if not setting:
        return None
    name, _, model = setting.rpartition("/") if "/" in setting else ("", "", setting)
    provider = _provider_named(name, upstreams) if name else _first_openai_style(upstreams)
    if provider is None and name and name not in upstreams.providers:
        # A model id may itself hold a slash (org/model): then it names no provider.
        provider, model = _first_openai_style(upstreams), setting
    if provider is None:
        raise EmbeddingModelSettingError(
            f"UHP_MEMORY_EMBEDDING_MODEL={setting}: no configured provider with an "
            f"OpenAI-style API ({', '.join(OPENAI_STYLE_APIS)}) serves embeddings; set "
            "OPENAI_API_KEY (and OPENAI_BASE_URL) or add one in UHP_PROVIDERS_FILE"
        )
    log.info("memory_embedder", extra={"provider": provider.name, "model": model})
    return GatewayEmbedder(upstreams.http, provider, model)


def _provider_named(name: str, upstreams: Upstreams) -> Provider | None:
    provider = upstreams.get(name)
    if provider is not None and provider.api not in OPENAI_STYLE_APIS:
        raise EmbeddingModelSettingError(
            f"UHP_MEMORY_EMBEDDING_MODEL: the provider `{name}` speaks `{provider.api}`, "
            f"which has no embeddings route; name one speaking {' or '.join(OPENAI_STYLE_APIS)}"
        )
    return provider


def _first_openai_style(upstreams: Upstreams) -> Provider | None:
    return next((p for p in upstreams.providers.values() if p.api in OPENAI_STYLE_APIS), None)
