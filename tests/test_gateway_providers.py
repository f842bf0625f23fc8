"""The gateway in front of a Chat-Completions-only provider (the scripted one, over HTTP):
translated calls, errors in the CLI's shape, 429 with its retry headers, the models and
token-counting routes, and per-turn connections (settings, headers, URL policy)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fastapi import FastAPI

from tests.scripted_provider import RunningProvider, start_provider
from uhp_server.gateway import TokenRegistry, Upstreams, gateway_path, make_gateway_router
from uhp_server.gateway.connection import ModelConnection, connection_provider
from uhp_server.gateway.providers import Provider
from uhp_server.settings import Settings

KEY = "sk-chat-only-provider-key"
RUN_TOKEN = "run-token-abcdef123"
OPENAI = gateway_path("openai")
ANTHROPIC = gateway_path("anthropic") + "/v1"
RESPONSES_BODY = {"model": "x", "input": "SAY hi", "stream": False}
MESSAGES_BODY = {
    "model": "x",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "SAY hi"}],
}


@pytest.fixture(scope="module")
def chat_only() -> Iterator[RunningProvider]:
    with start_provider(KEY, ["llama"], chat_only=True) as running:
        yield running


def chat_provider(running: RunningProvider, **changes: object) -> Provider:
    fields: dict = {
        "name": "local",
        "api": "chat",
        "base_url": running.base_url,
        "api_key": KEY,
        "models": ("llama",),
    }
    fields.update(changes)
    return Provider(**fields)


@pytest.fixture
async def gateway(
    chat_only: RunningProvider,
) -> AsyncIterator[tuple[httpx.AsyncClient, TokenRegistry]]:
    chat_only.reset()
    tokens = TokenRegistry()
    upstreams = Upstreams(Settings(OPENAI_API_KEY=None, ANTHROPIC_API_KEY=None))
    app = FastAPI()
    app.include_router(make_gateway_router(tokens, upstreams))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        yield client, tokens
    await upstreams.aclose()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_a_responses_call_is_translated_and_pinned(
    gateway: tuple[httpx.AsyncClient, TokenRegistry], chat_only: RunningProvider
) -> None:
    client, tokens = gateway
    grant = tokens.issue("openai", "llama", 60, provider=chat_provider(chat_only))
    answer = await client.post(
        f"{OPENAI}/responses", headers=bearer(grant.token), json=RESPONSES_BODY
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "response"
    assert json.dumps(body["output"]).count("hi") >= 1
    (call,) = chat_only.requests()
    assert call["path"] == "/v1/chat/completions"
    assert call["body"]["model"] == "llama"
    assert call["headers"]["authorization"] == f"Bearer {KEY}"
    assert grant.usage.seen  # usage read from the provider's Chat answer


async def test_a_429_keeps_its_status_and_retry_headers_in_each_wire(
    gateway: tuple[httpx.AsyncClient, TokenRegistry], chat_only: RunningProvider
) -> None:
    client, tokens = gateway
    provider = chat_provider(chat_only)
    calls = [
        ("openai", f"{OPENAI}/responses", {**RESPONSES_BODY, "input": "FAIL 429 slow down"}),
        (
            "openai",
            f"{OPENAI}/chat/completions",
            {"model": "x", "messages": [{"role": "user", "content": "FAIL 429 slow down"}]},
        ),
        (
            "anthropic",
            f"{ANTHROPIC}/messages",
            {**MESSAGES_BODY, "messages": [{"role": "user", "content": "FAIL 429 slow down"}]},
        ),
    ]
    for backend, url, payload in calls:
        grant = tokens.issue(backend, "llama", 60, provider=provider)
        answer = await client.post(url, headers=bearer(grant.token), json=payload)
        assert answer.status_code == 429, url
        assert answer.headers["retry-after"] == "7"
        assert answer.headers["x-ratelimit-remaining-requests"] == "0"
        error = answer.json()
        if backend == "anthropic":
            assert error["type"] == "error"
            assert error["error"]["type"] == "rate_limit_error"
            assert "slow down" in error["error"]["message"]
        else:
            assert "slow down" in error["error"]["message"]


async def test_provider_errors_come_back_in_the_clis_shape(
    gateway: tuple[httpx.AsyncClient, TokenRegistry], chat_only: RunningProvider
) -> None:
    client, tokens = gateway
    grant = tokens.issue("anthropic", "llama", 60, provider=chat_provider(chat_only))
    payload = {**MESSAGES_BODY, "messages": [{"role": "user", "content": "FAIL 400 no good"}]}
    answer = await client.post(f"{ANTHROPIC}/messages", headers=bearer(grant.token), json=payload)
    assert answer.status_code == 400
    assert answer.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "no good"},
    }
    wrong_key = chat_provider(chat_only, api_key="sk-wrong-key-for-test")
    grant = tokens.issue("anthropic", "llama", 60, provider=wrong_key)
    answer = await client.post(
        f"{ANTHROPIC}/messages", headers=bearer(grant.token), json=MESSAGES_BODY
    )
    assert answer.status_code == 424  # the server's key refused: not worth retrying
    assert answer.json()["type"] == "error"
    assert "sk-wrong-key-for-test" not in answer.text


async def test_an_untranslatable_request_is_refused_in_the_clis_shape(
    gateway: tuple[httpx.AsyncClient, TokenRegistry], chat_only: RunningProvider
) -> None:
    client, tokens = gateway
    grant = tokens.issue("openai", "llama", 60, provider=chat_provider(chat_only))
    payload = {**RESPONSES_BODY, "input": ["not an item"]}
    answer = await client.post(f"{OPENAI}/responses", headers=bearer(grant.token), json=payload)
    assert answer.status_code == 400
    assert "input[0] is not an object" in answer.json()["error"]["message"]
    assert chat_only.requests() == []  # nothing half-sent


async def test_models_and_token_counting_are_answered_by_the_gateway(
    gateway: tuple[httpx.AsyncClient, TokenRegistry], chat_only: RunningProvider
) -> None:
    client, tokens = gateway
    provider = chat_provider(chat_only)
    openai_grant = tokens.issue("openai", "llama", 60, provider=provider)
    listed = await client.get(f"{OPENAI}/models", headers=bearer(openai_grant.token))
    assert [m["id"] for m in listed.json()["data"]] == ["llama"]
    anthropic_grant = tokens.issue("anthropic", "llama", 60, provider=provider)
    headers = {"x-api-key": anthropic_grant.token}
    listed = await client.get(f"{ANTHROPIC}/models", headers=headers)
    assert listed.json()["data"][0] | {"id": "llama", "type": "model"} == listed.json()["data"][0]
    counted = await client.post(
        f"{ANTHROPIC}/messages/count_tokens", headers=headers, json=MESSAGES_BODY
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    stored = await client.get(f"{OPENAI}/responses/resp_1", headers=bearer(openai_grant.token))
    assert stored.status_code == 404  # a Chat provider stores no responses
    assert chat_only.requests() == []


async def test_a_connection_sets_generation_and_headers_on_every_call(
    gateway: tuple[httpx.AsyncClient, TokenRegistry], chat_only: RunningProvider
) -> None:
    client, tokens = gateway
    connection = ModelConnection(
        base_url=chat_only.base_url,
        model="llama",
        api_key=KEY,
        generation={"temperature": 0.1, "max_tokens": 99, "seed": 3},
        headers={"X-Run-Token": RUN_TOKEN},
    )
    provider = connection_provider(connection, allow_private=True)
    grant = tokens.issue("openai", "llama", 60, provider=provider)
    payload = {**RESPONSES_BODY, "temperature": 0.9, "max_output_tokens": 5000}
    assert (
        await client.post(f"{OPENAI}/responses", headers=bearer(grant.token), json=payload)
    ).status_code == 200
    chat = {
        "model": "x",
        "messages": [{"role": "user", "content": "SAY a"}],
        "max_completion_tokens": 7,
    }
    assert (
        await client.post(f"{OPENAI}/chat/completions", headers=bearer(grant.token), json=chat)
    ).status_code == 200
    for call in chat_only.requests():
        body = call["body"]
        assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.1, 99, 3)
        assert "max_completion_tokens" not in body
        assert call["headers"]["x-run-token"] == RUN_TOKEN
    assert RUN_TOKEN not in repr(grant) + repr(connection) + repr(provider)
    assert KEY not in repr(grant) + repr(connection) + repr(provider)
    tokens.revoke(grant.token)
    assert grant.provider is None  # the connection's key goes with the grant


async def test_a_connection_is_checked_again_on_every_call(
    gateway: tuple[httpx.AsyncClient, TokenRegistry], chat_only: RunningProvider
) -> None:
    client, tokens = gateway
    # Accepted while private hosts were allowed; the call is checked (resolved, pinned) again.
    provider = chat_provider(chat_only, allow_private=False)
    grant = tokens.issue("openai", "llama", 60, provider=provider)
    answer = await client.post(
        f"{OPENAI}/responses", headers=bearer(grant.token), json=RESPONSES_BODY
    )
    assert answer.status_code == 502
    assert "not allowed" in answer.json()["error"]["message"]
    local = chat_provider(chat_only, base_url=chat_only.base_url.replace("127.0.0.1", "localhost"))
    pinned = tokens.issue(
        "openai", "llama", 60, provider=Provider(**{**local.__dict__, "allow_private": True})
    )
    answer = await client.post(
        f"{OPENAI}/responses", headers=bearer(pinned.token), json=RESPONSES_BODY
    )
    assert answer.status_code == 200
    (call,) = chat_only.requests()
    assert call["headers"]["host"].startswith("localhost:")  # the name kept, the address pinned


async def test_a_model_the_provider_says_does_not_exist_is_listed_unavailable(
    chat_only: RunningProvider,
) -> None:
    # A static list names a model the provider does not serve: the list alone would call it
    # available; the provider's own "does not exist" on a real call corrects it.
    settings = Settings(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=chat_only.base_url,
        ANTHROPIC_API_KEY=None,
        openai_api="chat",
        openai_models="llama,only-local",
        models_cache_seconds=300,
    )
    tokens = TokenRegistry()
    upstreams = Upstreams(settings)
    app = FastAPI()
    app.include_router(make_gateway_router(tokens, upstreams))
    transport = httpx.ASGITransport(app=app)
    try:
        assert await upstreams.list_models("openai") == ["llama", "only-local"]
        grant = tokens.issue("openai", "only-local", 60)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            answer = await client.post(
                f"{OPENAI}/responses", headers=bearer(grant.token), json=RESPONSES_BODY
            )
        assert answer.status_code == 404
        assert await upstreams.list_models("openai") == ["llama"]
    finally:
        await upstreams.aclose()
