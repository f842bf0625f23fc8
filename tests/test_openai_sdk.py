"""The official `openai` SDK's Responses API works against the server unchanged."""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest

from tests.conftest import API_KEY, DEFAULT_MODEL
from tests.support.schema import check_stream
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def sdk(server: ServerProcess) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0)
    yield client
    client.close()


def test_blocking_create_and_retrieve(sdk: openai.OpenAI) -> None:
    response = sdk.responses.create(model=DEFAULT_MODEL, input="SAY hello from the sdk")
    assert response.status == "completed"
    assert response.output_text == "hello from the sdk"
    assert response.id.startswith("resp_")
    assert response.usage is not None and response.usage.output_tokens > 0
    # The detail objects OpenAI's usage always has, which SDK users read without a check.
    assert response.usage.input_tokens_details.cached_tokens >= 0
    assert response.usage.output_tokens_details.reasoning_tokens >= 0
    again = sdk.responses.retrieve(response.id)
    assert again.output_text == response.output_text and again.status == "completed"
    (item,) = list(sdk.responses.input_items.list(response.id, limit=1, order="desc"))
    assert item.type == "message" and item.role == "user"
    follow = sdk.responses.create(
        model=DEFAULT_MODEL, input="SAY continued", previous_response_id=response.id
    )
    assert follow.metadata is not None and response.metadata is not None
    assert follow.metadata["session_id"] == response.metadata["session_id"]


def test_streaming_create_and_retrieve_stream(sdk: openai.OpenAI) -> None:
    events = list(sdk.responses.create(model=DEFAULT_MODEL, input="SAY streamed text", stream=True))
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "streamed text"
    check_stream([e.model_dump(exclude_none=False) for e in events])
    final = events[-1].response
    assert final.output_text == "streamed text"
    replay = list(sdk.responses.retrieve(final.id, stream=True, starting_after=2))
    assert [e.sequence_number for e in replay] == list(range(3, len(events)))


def test_cancel(sdk: openai.OpenAI) -> None:
    started = sdk.responses.create(
        model=DEFAULT_MODEL, input="SLOW 20\nSAY " + "slow " * 40, background=True
    )
    assert started.status == "in_progress"
    time.sleep(2)
    cancelled = sdk.responses.cancel(started.id)
    assert cancelled.status == "cancelled"
    assert sdk.responses.retrieve(started.id).status == "cancelled"


def test_errors_surface_as_sdk_exceptions(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.responses.retrieve("resp_does_not_exist")
    assert caught.value.code == "response_not_found"
    bad = openai.OpenAI(base_url=str(sdk.base_url), api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.responses.create(model=DEFAULT_MODEL, input="SAY x")


def test_a_stream_that_spans_keep_alives_parses_in_the_sdk(sdk: openai.OpenAI) -> None:
    # The test server sends `: keep-alive` every second; the SDK must read through them.
    events = list(
        sdk.responses.create(
            model=DEFAULT_MODEL, input="SLEEP 3\nSLOW 2\nSAY through the pings", stream=True
        )
    )
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "through the pings"
