"""Long-lived streams capped per principal and in all (uhp_server/http/streams.py): a key at its
cap gets 429 in its door's own error shape, and no task starts for it; health and discovery
answer, and another principal still streams. (At the connection cap itself, on a real
server: tests/test_connection_limits.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import keys
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import answer
from tests.support.in_process import InProcess, in_process
from uhp_server.http.streams import StreamLimits, short_request_room

PER_KEY = 2


def test_streams_leave_room_for_short_requests_and_for_other_principals() -> None:
    forty = StreamLimits(40)
    assert short_request_room(40) == 5 and forty.total == 35
    assert forty.per_principal == 8  # a quarter of the room for streams
    default = StreamLimits(2048)
    assert default.total == 2048 - 256 and default.per_principal == 448
    small = StreamLimits(8)
    assert small.total == 4 and small.per_principal == 1
    assert StreamLimits(40, per_principal=100).per_principal == 35  # never past the room
    assert StreamLimits(1).total == 1


def test_a_principal_at_its_cap_is_refused_and_its_places_come_back() -> None:
    limits = StreamLimits(40, per_principal=2)
    first, _second = limits.take("a"), limits.take("a")
    with pytest.raises(Exception) as refused:
        limits.take("a")
    assert getattr(refused.value, "status", None) == 429
    limits.take("b")  # another principal is not held back by a's
    first.give_back()
    first.give_back()  # once only
    assert limits.open_for("a") == 1
    limits.take("a")


def test_all_streams_together_stay_below_the_connection_cap() -> None:
    limits = StreamLimits(8, per_principal=4)  # room for 4 streams: 4 connections stay free
    for principal in "abcd":
        limits.take(principal)
    with pytest.raises(Exception) as refused:
        limits.take("e")
    assert getattr(refused.value, "status", None) == 429


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, max_streams_per_principal=PER_KEY
    ) as running:
        yield running


def _principal_of(server: InProcess, response_id: str) -> str:
    return server.run(response_id).principal_id


async def test_a_key_holding_its_streams_gets_429_on_every_door_and_health_still_answers(
    server: InProcess,
) -> None:
    server.base.script("hello", answer("hi"))
    done = (await server.submit("hello")).json()
    principal = _principal_of(server, done["id"])
    harness_id = done["metadata"]["harness_id"]
    streams: StreamLimits = server.app.state.streams
    held = [streams.take(principal) for _ in range(PER_KEY)]  # two event streams left open
    turns_before = len(server.base.turns)

    refused = [
        await server.submit("hello", stream=True),
        await server.client.get(f"/v1/responses/{done['id']}?stream=true"),
        await server.client.get(f"/v1/harnesses/{harness_id}/events"),
    ]
    for answered in refused:
        assert answered.status_code == 429, answered.text
        assert answered.json()["error"]["code"] == "rate_limited"
        assert int(answered.headers["retry-after"]) > 0
    model = (await server.client.get("/openai/v1/models")).json()["data"][0]["id"]
    chat = await server.client.post(
        "/openai/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hello"}], "stream": True},
    )
    assert chat.status_code == 429, chat.text
    assert chat.json()["error"]["type"] == "rate_limit_error"  # OpenAI's shape
    assert len(server.base.turns) == turns_before  # no refused stream started a task

    for path in ("/healthz", "/readyz", "/v1/uhp"):
        assert (await server.client.get(path)).status_code == 200, path
    # Short requests of the same key are not streams: still served.
    assert (await server.client.get(f"/v1/responses/{done['id']}")).status_code == 200

    # Another principal streams.
    _, other_key = server.ctx.db.run(keys.create_key, "other")
    other = {"Authorization": f"Bearer {other_key}"}
    streamed = await server.client.post(
        "/v1/responses", json={"input": "hello", "stream": True}, headers=other
    )
    assert streamed.status_code == 200
    assert "event: response.completed" in streamed.text

    # A stream's place comes back when it ends; a key with places left streams again.
    held[0].give_back()
    replay = await server.client.get(f"/v1/responses/{done['id']}?stream=true")
    assert replay.status_code == 200 and "response.completed" in replay.text
    assert streams.open_for(principal) == PER_KEY - 1
    assert streams.open == PER_KEY - 1
