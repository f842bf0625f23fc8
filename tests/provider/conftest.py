"""One scripted provider for these tests, reset before each, and clients of it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.provider.wire_helpers import KEY, MODELS
from tests.scripted_provider import RunningProvider, start_provider


@pytest.fixture(scope="module")
def running() -> Iterator[RunningProvider]:
    provider = start_provider(KEY, MODELS)
    yield provider
    provider.stop()


@pytest.fixture
def provider(running: RunningProvider) -> RunningProvider:
    running.reset()
    return running


@pytest.fixture
def oai(provider: RunningProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=provider.base_url, api_key=KEY, max_retries=0)


@pytest.fixture
def http(provider: RunningProvider) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=provider.url, timeout=30) as client:
        yield client
