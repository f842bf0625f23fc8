"""The console's live stream against a real server and CLI (scripted model): a session page's
running turn as escaped HTML, event by event, resumed after the last event id, ending when
the turn does, and never another principal's. The page that reads it is walked in
tests/test_console_browser.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY
from tests.support.console import console_client as signed_in_client
from tests.support.server import ServerProcess
from tests.support.sse import Stream, parse_lines, read_stream
from tests.test_tasks_e2e import create, wait_terminal

pytestmark = pytest.mark.slow

HOSTILE = "<img src=x onerror=alert(1)>"


def console_client(server: ServerProcess, key: str = API_KEY) -> httpx.Client:
    return signed_in_client(server.url, key)


@pytest.fixture
def browser(server: ServerProcess) -> Iterator[httpx.Client]:
    signed_in = console_client(server)
    yield signed_in
    signed_in.close()


def live(browser: httpx.Client, session_id: str, **kwargs: Any) -> Stream:
    return read_stream(browser, "GET", f"/console/sessions/{session_id}/live", **kwargs)


def sequence(event_id: str) -> int:
    response_id, number = event_id.rsplit(".", 1)
    assert response_id.startswith("resp_")
    return int(number)


def test_a_running_turn_streams_as_escaped_html_and_ends(
    client: httpx.Client, browser: httpx.Client
) -> None:
    words = " ".join(f"word{i}" for i in range(30))
    running = create(client, {"input": f"SLOW 4\nSAY {HOSTILE} {words}", "background": True})
    session_id = running["metadata"]["session_id"]
    stream = live(browser, session_id)
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert "default-src 'none'" in stream.headers["content-security-policy"]
    assert stream.names[-1] == "end"
    turns = stream.events[:-1]
    assert len(turns) >= 3, "the turn should arrive in several messages as it runs"
    numbers = [sequence(i) for i in stream.ids]
    assert numbers == sorted(set(numbers))  # each message covers later events than the last
    assert all(t["number"] == 1 for t in turns)
    assert turns[0]["running"] and turns[0]["status"] == "in_progress"
    assert turns[-1]["status"] == "completed" and not turns[-1]["running"]
    lengths = [len(t["html"]) for t in turns]
    assert lengths[-1] > lengths[0]  # the answer grew on the way
    final = turns[-1]["html"]
    assert "word29" in final
    assert "<img" not in final and "&lt;img src=x onerror=alert(1)&gt;" in final
    # The last message covers the API stream's last event.
    api = read_stream(client, "GET", f"/v1/responses/{running['id']}?stream=true")
    assert sequence(stream.ids[-1]) == api.events[-1]["sequence_number"]


def test_a_reconnect_is_sent_only_what_came_after_its_last_event(
    client: httpx.Client, browser: httpx.Client
) -> None:
    running = create(client, {"input": "SLOW 6\nSAY " + "tick " * 40, "background": True})
    session_id = running["metadata"]["session_id"]
    first = live(browser, session_id, stop_after=2)  # then the connection drops
    last_id = first.ids[-1]
    resumed = live(browser, session_id, headers={"Last-Event-ID": last_id})
    assert resumed.names[-1] == "end"
    assert all(sequence(i) > sequence(last_id) for i in resumed.ids)
    assert resumed.events[-2]["status"] == "completed"
    # Once the turn has ended, resuming from its last event sends only the end.
    again = live(browser, session_id, headers={"Last-Event-ID": resumed.ids[-1]})
    assert again.names == ["end"]
    assert wait_terminal(client, running["id"])["status"] == "completed"


def test_another_principals_running_turn_is_not_streamed(
    server: ServerProcess, client: httpx.Client, other_key: str
) -> None:
    running = create(client, {"input": "SLOW 3\nSAY private words", "background": True})
    session_id = running["metadata"]["session_id"]
    other = console_client(server, other_key)
    answer = other.get(f"/console/sessions/{session_id}/live")
    other.close()
    assert answer.status_code == 404
    assert "private words" not in answer.text
    wait_terminal(client, running["id"])


def test_signed_out_the_stream_sends_the_browser_to_sign_in(
    client: httpx.Client, server: ServerProcess
) -> None:
    done = create(client, {"input": "SAY done"})
    with httpx.Client(base_url=server.url) as stranger:
        answer = stranger.get(f"/console/sessions/{done['metadata']['session_id']}/live")
    assert answer.status_code == 303 and answer.headers["location"] == "/console/sign-in"


def test_the_stream_messages_are_json_a_page_can_apply(
    client: httpx.Client, browser: httpx.Client
) -> None:
    """What console.js reads of each message: the turn's number, key and HTML, its status
    and label, and the questions' HTML (empty while none waits)."""
    done = create(client, {"input": "SAY short"})
    with browser.stream("GET", f"/console/sessions/{done['metadata']['session_id']}/live") as s:
        stream = parse_lines(s.iter_lines(), Stream())
    message = stream.events[0]
    assert set(message) == {
        "number",
        "key",
        "html",
        "status",
        "status_label",
        "running",
        "questions",
    }
    assert message["questions"].strip() == ""
    assert json.loads(json.dumps(message)) == message
