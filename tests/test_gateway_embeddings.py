"""Embeddings from the configured model provider (uhp_server/gateway/embeddings.py): the
`Embedder` memory providers are handed, against the scripted provider's /v1/embeddings: the
gateway's credentials, order kept across batches, and honest failures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conftest import MODELS, PROVIDER_KEY
from tests.scripted_provider import RunningProvider, start_provider
from tests.scripted_provider.embeddings import vector
from uhp_server.gateway import embeddings
from uhp_server.gateway.embeddings import (
    EmbeddingModelSettingError,
    GatewayEmbedder,
    embedder_for,
)
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.memories.provider import EmbeddingsUnavailable
from uhp_server.settings import Settings

EMBEDDING_MODEL = "embed-test"


def _settings(provider: RunningProvider, **more: Any) -> Settings:
    return Settings(
        providers_file=None,
        OPENAI_API_KEY=PROVIDER_KEY,
        OPENAI_BASE_URL=provider.base_url,
        **more,
    )


@pytest.fixture
async def upstreams(provider: RunningProvider) -> AsyncIterator[Upstreams]:
    upstreams = Upstreams(_settings(provider))
    yield upstreams
    await upstreams.aclose()


@pytest.fixture
def embedder(provider: RunningProvider, upstreams: Upstreams) -> GatewayEmbedder:
    found = embedder_for(_settings(provider, memory_embedding_model=EMBEDDING_MODEL), upstreams)
    assert found is not None
    return found


async def test_the_embedder_calls_the_configured_providers_embeddings_with_its_key(
    provider: RunningProvider, embedder: GatewayEmbedder
) -> None:
    provider.reset()
    vectors = await embedder.embed(["Acme renews in March", "the coffee machine"])
    assert vectors == [vector("Acme renews in March"), vector("the coffee machine")]
    [call] = [r for r in provider.requests() if r["path"] == "/v1/embeddings"]
    assert call["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert call["body"] == {
        "model": EMBEDDING_MODEL,
        "input": ["Acme renews in March", "the coffee machine"],
    }


async def test_no_embedding_model_no_embedder_and_a_provider_without_the_route_says_so(
    provider: RunningProvider, upstreams: Upstreams
) -> None:
    assert embedder_for(_settings(provider), upstreams) is None
    chat_only = start_provider(PROVIDER_KEY, MODELS, chat_only=True)
    try:
        settings = _settings(chat_only, memory_embedding_model=EMBEDDING_MODEL)
        bare = Upstreams(settings)
        try:
            found = embedder_for(settings, bare)
            assert found is not None
            with pytest.raises(EmbeddingsUnavailable, match="answered 404"):
                await found.embed(["anything"])
        finally:
            await bare.aclose()
    finally:
        chat_only.stop()


async def test_an_embedding_model_of_a_provider_that_cannot_embed_stops_start_up(
    provider: RunningProvider,
) -> None:
    settings = Settings(
        providers_file=None,
        ANTHROPIC_API_KEY=PROVIDER_KEY,
        ANTHROPIC_BASE_URL=provider.url,
        memory_embedding_model="anthropic/embed-test",
    )
    upstreams = Upstreams(settings)
    try:
        with pytest.raises(EmbeddingModelSettingError, match="no embeddings route"):
            embedder_for(settings, upstreams)
        bare = settings.model_copy(update={"memory_embedding_model": "embed-test"})
        with pytest.raises(EmbeddingModelSettingError, match="OpenAI-style"):
            embedder_for(bare, upstreams)
    finally:
        await upstreams.aclose()


async def test_many_texts_go_in_batches_and_come_back_in_order(
    provider: RunningProvider, embedder: GatewayEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embeddings, "BATCH", 2)
    provider.reset()
    texts = ["alpha beta", "gamma delta", "epsilon zeta", "theta iota", "kappa"]
    assert await embedder.embed(texts) == [vector(text) for text in texts]
    calls = [r["body"]["input"] for r in provider.requests() if r["path"] == "/v1/embeddings"]
    assert calls == [texts[0:2], texts[2:4], texts[4:5]]


async def test_an_unknown_embedding_model_is_unavailable_not_empty(
    provider: RunningProvider, upstreams: Upstreams
) -> None:
    settings = _settings(provider, memory_embedding_model="openai/no-such-embedder")
    found = embedder_for(settings, upstreams)
    assert found is not None and found.model == "no-such-embedder"
    with pytest.raises(EmbeddingsUnavailable, match="answered 404") as failed:
        await found.embed(["anything"])
    assert PROVIDER_KEY not in str(failed.value) and provider.url not in str(failed.value)
