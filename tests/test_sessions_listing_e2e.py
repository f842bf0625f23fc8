"""Inspecting, deleting and following sessions (Sessions §2, §3, §6; Streaming §5), end to end
with the real CLI."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY
from tests.support.sandbox_processes import sandbox_processes
from tests.support.schema import validate
from tests.support.server import ServerProcess
from tests.support.sse import Stream, parse_lines
from tests.test_artifacts_e2e import citations
from tests.test_sessions_e2e import first_delta
from tests.test_tasks_e2e import create

pytestmark = pytest.mark.slow


def session_processes(session_id: str) -> list[str]:
    """Processes still running with this session's folders (the sandbox binds them)."""
    return sandbox_processes(session_id)


def test_a_session_reads_back_with_its_turns_in_order(client: httpx.Client) -> None:
    first = create(
        client, {"input": "THINK planning\nRUN echo hello > hello.txt\nSAY wrote hello.txt"}
    )
    second = create(client, {"input": "SAY second answer", "previous_response_id": first["id"]})
    unstored = create(
        client, {"input": "SAY not kept", "previous_response_id": second["id"], "store": False}
    )
    session_id = first["metadata"]["session_id"]
    session = client.get(f"/v1/sessions/{session_id}").json()
    validate("Session", session)
    assert session["id"] == session_id and session["object"] == "session"
    assert session["harness_id"] == first["metadata"]["harness_id"]
    assert session["title"].startswith("THINK planning")
    assert session["status"] == "completed"
    assert session["updated_at"] >= session["created_at"]
    listed = client.get(
        "/v1/sessions", params={"harness": session["harness_id"], "limit": 100}
    ).json()
    assert session_id in [s["id"] for s in listed["sessions"]]

    turns = client.get(f"/v1/sessions/{session_id}/turns").json()["turns"]
    assert [t["id"] for t in turns] == [first["id"], second["id"], unstored["id"]]
    one, two, three = turns
    assert one["status"] == "completed"
    assert one["user"] == "THINK planning\nRUN echo hello > hello.txt\nSAY wrote hello.txt"
    assert one["assistant"] == "wrote hello.txt"
    assert len(one["tools"]) == 1
    tool = one["tools"][0]
    assert "echo hello" in tool["arguments"] and tool["name"] and "output" in tool
    assert [f["filename"] for f in one["files"]] == ["hello.txt"]
    assert one["files"][0]["id"] == citations(first)[0]["file_id"]
    for file in one["files"]:
        validate("File", file)
    assert two["user"] == "SAY second answer" and two["assistant"] == "second answer"
    assert two["tools"] == [] and two["files"] == []
    assert three == {"id": unstored["id"], "status": "completed", "created_at": three["created_at"]}
    # Each turn's id is a response id a client can fetch.
    assert client.get(f"/v1/responses/{one['id']}").json() == first


def test_other_principals_cannot_see_or_touch_a_session(
    client: httpx.Client, other_key: str
) -> None:
    mine = create(client, {"input": "SAY mine"})
    session_id = mine["metadata"]["session_id"]
    with httpx.Client(
        base_url=str(client.base_url), headers={"Authorization": f"Bearer {other_key}"}
    ) as other:
        for method, path in (
            ("GET", f"/v1/sessions/{session_id}"),
            ("GET", f"/v1/sessions/{session_id}/turns"),
            ("DELETE", f"/v1/traces/{session_id}"),
        ):
            answer = other.request(method, path)
            assert answer.status_code == 404, path
            assert answer.json()["error"]["code"] == "session_not_found"
        theirs = other.get("/v1/sessions", params={"limit": 100}).json()["sessions"]
        assert session_id not in [s["id"] for s in theirs]
    assert client.get(f"/v1/sessions/{session_id}").status_code == 200


def test_deleting_a_trace_cancels_the_running_turn_then_removes_everything(
    client: httpx.Client, server: ServerProcess
) -> None:
    first = create(client, {"input": "RUN echo kept > kept.txt\nSAY saved kept.txt"})
    session_id = first["metadata"]["session_id"]
    artifact = citations(first)[0]
    share = client.post(f"/v1/sessions/{session_id}/share").json()
    running = create(
        client,
        {
            "input": "SLOW 20\nSAY " + "still writing " * 40,
            "previous_response_id": first["id"],
            "background": True,
        },
    )
    first_delta(client, running["id"])
    assert session_processes(session_id)  # the turn's CLI is running in its sandbox
    blobs_before = {p.name for p in (server.data_dir / "blobs").rglob("*") if p.is_file()}
    started = time.monotonic()
    deleted = client.delete(f"/v1/traces/{session_id}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"id": session_id, "object": "session.deleted", "deleted": True}
    assert time.monotonic() - started < 15
    assert session_processes(session_id) == []  # the turn was stopped, not left writing
    for path in (
        f"/v1/sessions/{session_id}",
        f"/v1/sessions/{session_id}/turns",
        f"/v1/sessions/{session_id}/files",
        f"/v1/sessions/{session_id}/files/archive",
        f"/v1/sessions/{session_id}/share",
        f"/v1/responses/{first['id']}",
        f"/v1/responses/{first['id']}/input_items",
        f"/v1/responses/{running['id']}",
        f"/v1/responses/{running['id']}?stream=true",
        f"/v1/containers/{artifact['container_id']}/files/{artifact['file_id']}/content",
        share["url"],
        share["url"] + "/state",
    ):
        answer = client.get(path)
        assert answer.status_code == 404, (path, answer.text)
    continued = client.post(
        "/v1/responses", json={"input": "SAY again", "previous_response_id": first["id"]}
    )
    assert continued.status_code == 404
    assert client.delete(f"/v1/traces/{session_id}").status_code == 404
    listed = client.get("/v1/sessions", params={"limit": 100}).json()["sessions"]
    assert session_id not in [s["id"] for s in listed]
    # The bytes are gone too: the workspace, the agent home, the artifact blobs.
    assert not (server.data_dir / "sessions" / session_id).exists()
    blobs_after = {p.name for p in (server.data_dir / "blobs").rglob("*") if p.is_file()}
    assert len(blobs_before - blobs_after) >= 1
    with sqlite3.connect(server.data_dir / "uhp.sqlite3") as db:
        events = db.execute(
            "SELECT count(*) FROM event WHERE response_id IN (?, ?)", (first["id"], running["id"])
        ).fetchone()[0]
        artifacts = db.execute(
            "SELECT count(*) FROM artifact WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
    assert events == 0 and artifacts == 0


def _follow(server: ServerProcess, key: str, harness_id: str, into: Stream, ready: Any) -> None:
    """Read the feed until it shows a task completing."""
    headers = {"Authorization": f"Bearer {key}"}
    with (
        httpx.Client(base_url=server.url, headers=headers, timeout=60) as http,
        http.stream("GET", f"/v1/harnesses/{harness_id}/events") as answer,
    ):
        into.headers = dict(answer.headers)
        ready.set()
        for line in answer.iter_lines():
            if line.startswith(":"):
                into.comments.append(line[1:].strip())
            elif line.startswith("data:"):
                parse_lines([line, ""], into)
                if into.events[-1]["type"] == "response.completed":
                    return


def test_the_harness_events_feed_follows_its_sessions_live(
    client: httpx.Client, server: ServerProcess, other_key: str
) -> None:
    harness_id = client.get("/v1/harnesses").json()["harnesses"][0]["id"]
    feed = Stream()
    ready = threading.Event()
    reader = threading.Thread(
        target=_follow, args=(server, API_KEY, harness_id, feed, ready), daemon=True
    )
    reader.start()
    assert ready.wait(10)
    time.sleep(0.3)
    result = create(client, {"input": "RUN echo hi\nSAY fed"})
    reader.join(30)
    assert not reader.is_alive(), "the feed never showed the task finishing"
    assert feed.headers["content-type"].startswith("text/event-stream")
    kinds = [e["type"] for e in feed.events]
    assert kinds[0] == "session.created"
    assert kinds[1:3] == ["response.created", "response.in_progress"]
    assert "response.output_item.done" in kinds and kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in feed.events] == list(range(len(feed.events)))
    session_id = result["metadata"]["session_id"]
    for event in feed.events:
        assert event["session_id"] == session_id and event["harness_id"] == harness_id
        if event["type"] != "session.created":
            assert event["response_id"] == result["id"]
    assert feed.events[-1]["response"] == result
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {other_key}"}
    ) as other:
        answer = other.get(f"/v1/harnesses/{harness_id}/events")
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "harness_not_found"


def test_the_feed_sends_keep_alives_and_only_the_callers_sessions(
    client: httpx.Client, server: ServerProcess, other_key: str
) -> None:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {other_key}"}, timeout=30
    ) as other:
        their_harness = other.get("/v1/harnesses").json()["harnesses"][0]["id"]
        seen = Stream()
        done = threading.Event()

        def listen() -> None:
            with other.stream("GET", f"/v1/harnesses/{their_harness}/events") as answer:
                start = time.monotonic()
                for line in answer.iter_lines():
                    if line.startswith(":"):
                        seen.comments.append(line[1:].strip())
                    elif line.startswith("data:"):
                        parse_lines([line, ""], seen)
                    if time.monotonic() - start > 4 or done.is_set():
                        return

        thread = threading.Thread(target=listen, daemon=True)
        thread.start()
        time.sleep(0.5)
        create(client, {"input": "SAY not yours"})  # the default principal's task
        time.sleep(2.5)
        done.set()
        thread.join(10)
    assert "keep-alive" in seen.comments  # UHP_KEEPALIVE_SECONDS=1 in the tests
    assert seen.events == []
