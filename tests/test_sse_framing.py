"""SSE framing as the simplest client reads it: messages split on LF LF, lines on LF.

The SSE standard also allows CRLF, but the protocol's conformance suite and many hand-written
clients split on "\\n\\n" only; with CRLF framing they see no events at all."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY
from tests.support.server import ServerProcess
from tests.test_tasks_e2e import create

pytestmark = pytest.mark.slow

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def naive_events(raw: bytes) -> list[dict[str, Any]]:
    """Parse a stream the naive way; every block must be well-formed when framed with LF."""
    text = raw.decode()
    assert "\r" not in text, "a message or line separated with CR"
    events = []
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":")
        )
        if not fields:
            continue  # a keep-alive comment before the next event
        event = json.loads(fields["data"])
        assert fields["event"] == event["type"]
        assert fields["id"] == str(event["sequence_number"])
        events.append(event)
    return events


def read_until_terminal(answer: httpx.Response) -> bytes:
    raw = b""
    for chunk in answer.iter_raw():
        raw += chunk
        if any(f'"type":"{kind}"'.encode() in raw for kind in TERMINAL) and raw.endswith(b"\n\n"):
            break
    return raw


def test_a_task_stream_parses_with_a_naive_lf_splitter(client: httpx.Client) -> None:
    body = {"input": "SLOW 2\nRUN echo hi\nSAY streamed words here", "stream": True}
    with client.stream("POST", "/v1/responses", json=body) as answer:
        assert answer.status_code == 200
        raw = read_until_terminal(answer)
    events = naive_events(raw)
    assert events[0]["type"] == "response.created"
    assert events[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    # A replay of the stored stream is framed the same way.
    response_id = events[0]["response"]["id"]
    with client.stream("GET", f"/v1/responses/{response_id}?stream=true") as replay:
        assert naive_events(read_until_terminal(replay)) == events


def test_the_harness_events_feed_parses_with_a_naive_lf_splitter(
    client: httpx.Client, server: ServerProcess
) -> None:
    harness_id = client.get("/v1/harnesses").json()["harnesses"][0]["id"]
    raw: list[bytes] = []
    ready = threading.Event()

    def follow() -> None:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        with (
            httpx.Client(base_url=server.url, headers=headers, timeout=60) as http,
            http.stream("GET", f"/v1/harnesses/{harness_id}/events") as answer,
        ):
            ready.set()
            raw.append(read_until_terminal(answer))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    assert ready.wait(10)
    time.sleep(1.5)  # at least one keep-alive comment (UHP_KEEPALIVE_SECONDS=1) comes first
    create(client, {"input": "SAY fed"})
    reader.join(30)
    assert raw, "the feed never showed the task finishing"
    assert b": keep-alive\n" in raw[0]
    kinds = [e["type"] for e in naive_events(raw[0])]
    assert kinds[0] == "session.created" and kinds[-1] == "response.completed"
