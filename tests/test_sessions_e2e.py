"""Sessions, cancellation, idempotency, retention: end to end with the real Codex CLI."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, server_env
from tests.scripted_provider import RunningProvider
from tests.support import passes
from tests.support.base_under_test import BASE
from tests.support.sandbox_processes import sandbox_processes
from tests.support.schema import check_stream, validate
from tests.support.server import ServerProcess, query
from tests.support.sse import read_stream
from tests.test_tasks_e2e import MODEL_PATHS, create, message_text, wait_terminal

pytestmark = pytest.mark.slow


def first_delta(client: httpx.Client, response_id: str) -> None:
    """Wait until the task has produced text (so a cancel has partial output to keep)."""
    deadline = time.monotonic() + 90  # generous: a loaded machine starts CLIs slowly
    while time.monotonic() < deadline:
        current = client.get(f"/v1/responses/{response_id}").json()
        if any(item["type"] == "message" for item in current["output"]):
            return
        time.sleep(0.1)
    raise AssertionError("no text arrived")


def agent_processes(data_dir: Path) -> list[str]:
    """Sandboxes of the server under test still alive (their folders are in its data dir);
    other servers' sandboxes on the same machine are not counted."""
    return sandbox_processes(str(data_dir))


def wait_no_agents(data_dir: Path, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while agent_processes(data_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert agent_processes(data_dir) == []


def test_cancel_answers_fast_keeps_partial_output_and_the_session_continues(
    client: httpx.Client, server: ServerProcess
) -> None:
    accepted = create(client, {"input": "SLOW 20\nSAY " + "word " * 60, "background": True})
    rid = accepted["id"]
    first_delta(client, rid)
    if os.environ.get("UHP_TEST_SANDBOX", "local") == "local":
        assert agent_processes(server.data_dir), "the running sandbox must be visible"
    started = time.monotonic()
    cancelled = client.post(f"/v1/responses/{rid}/cancel")
    assert time.monotonic() - started < 1.0
    assert cancelled.status_code == 200
    body = cancelled.json()
    validate("Response", body)
    assert body["status"] == "cancelled"
    assert body["error"] is None
    assert message_text(body).startswith("word")
    # Idempotent: a second cancel succeeds and changes nothing.
    again = client.post(f"/v1/responses/{rid}/cancel").json()
    assert again == body
    assert client.get(f"/v1/responses/{rid}").json() == body
    stream = read_stream(client, "GET", f"/v1/responses/{rid}?stream=true")
    assert check_stream(stream.events)["status"] == "cancelled"
    assert stream.events[-1]["type"] == "response.failed"
    wait_no_agents(server.data_dir)  # the turn really stopped
    follow = create(client, {"input": "SAY still here", "previous_response_id": rid})
    assert follow["status"] == "completed" and message_text(follow) == "still here"


@passes.same_on_every_base
def test_session_cancel_stops_whatever_runs_in_the_session(
    client: httpx.Client, server: ServerProcess
) -> None:
    first = create(client, {"input": "SAY start"})
    session_id = first["metadata"]["session_id"]
    running = create(
        client,
        {
            "input": "SLOW 20\nSAY " + "more " * 40,
            "previous_response_id": first["id"],
            "background": True,
        },
    )
    first_delta(client, running["id"])
    answer = client.post(f"/v1/sessions/{session_id}/cancel")
    assert answer.status_code == 200
    assert answer.json()["status"] == "cancelled"
    assert client.get(f"/v1/responses/{running['id']}").json()["status"] == "cancelled"
    # Nothing running: cancelling the session again is fine.
    assert client.post(f"/v1/sessions/{session_id}/cancel").status_code == 200
    wait_no_agents(server.data_dir)


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_one_task_at_a_time_per_session(client: httpx.Client) -> None:
    first = create(client, {"input": "SAY one"})
    running = create(
        client,
        {"input": "SLOW 4\nSAY two", "previous_response_id": first["id"], "background": True},
    )
    busy = client.post(
        "/v1/responses", json={"input": "SAY three", "previous_response_id": first["id"]}
    )
    assert busy.status_code == 409
    error = busy.json()["error"]
    assert error["code"] == "session_busy"
    assert "retry_after_ms" not in (error["detail"] or {})  # unknown while running: omitted
    # Different sessions run concurrently.
    other = create(client, {"input": "SAY parallel"})
    assert other["status"] == "completed"
    assert wait_terminal(client, running["id"])["status"] == "completed"


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_continuing_with_a_different_harness_is_a_conflict(client: httpx.Client) -> None:
    first = create(client, {"input": "SAY one"})
    other = client.post("/v1/harnesses", json=BASE.harness(name="another agent"))
    assert other.status_code == 200, other.text

    def continue_with(harness_id: str) -> httpx.Response:
        return client.post(
            "/v1/responses",
            json={
                "input": "SAY two",
                "previous_response_id": first["id"],
                "metadata": {"harness_id": harness_id},
            },
        )

    answer = continue_with(other.json()["id"])
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "harness_mismatch"
    unknown = continue_with("chrn_nosuchharness")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "harness_not_found"
    same = create(
        client,
        {
            "input": "SAY two",
            "previous_response_id": first["id"],
            "metadata": {"harness_id": first["metadata"]["harness_id"]},
        },
    )
    assert same["status"] == "completed"


def _provider_calls(provider: Any, marker: str) -> int:
    return sum(marker in str(r["body"]) for r in provider.requests() if r["path"] in MODEL_PATHS)


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_an_idempotent_repeat_returns_the_first_result_and_never_runs_twice(
    client: httpx.Client, provider: Any
) -> None:
    marker = f"idem-{time.time_ns()}"
    headers = {"Idempotency-Key": marker}
    body = {"input": f"SLOW 2\nSAY {marker}"}
    results: list[dict[str, Any]] = []

    def send() -> None:
        results.append(create(client, body, headers=headers))

    threads = [threading.Thread(target=send) for _ in range(3)]
    for thread in threads:
        thread.start()
        time.sleep(0.3)  # the repeats arrive while the first is still running
    for thread in threads:
        thread.join()
    assert len({r["id"] for r in results}) == 1
    assert all(r == results[0] for r in results)
    assert results[0]["status"] == "completed"
    replay = create(client, body, headers=headers)
    assert replay == results[0]
    streamed = read_stream(
        client, "POST", "/v1/responses", json={**body, "stream": True}, headers=headers
    )
    assert check_stream(streamed.events) == results[0]
    assert _provider_calls(provider, marker) == 1
    # Spelling out a default is the same request.
    explicit = create(client, {**body, "store": True, "metadata": None}, headers=headers)
    assert explicit == results[0]
    conflict = client.post("/v1/responses", json={"input": "SAY other"}, headers=headers)
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"].endswith("idempotency_key_reused")


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_an_expired_idempotency_key_can_be_used_again(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    retention = 3.0  # seconds; background tasks keep the test independent of turn length
    env = server_env(provider, UHP_IDEMPOTENCY_RETENTION_HOURS=str(retention / 3600))
    server = ServerProcess(tmp_path, env).start()
    try:
        with httpx.Client(
            base_url=server.url, timeout=120, headers={"Authorization": f"Bearer {API_KEY}"}
        ) as client:
            headers = {"Idempotency-Key": "reused-after-expiry"}
            first = create(client, {"input": "SAY first", "background": True}, headers=headers)
            time.sleep(retention + 1)
            again = create(client, {"input": "SAY second", "background": True}, headers=headers)
            assert again["id"] != first["id"]
            repeat = create(client, {"input": "SAY second", "background": True}, headers=headers)
            assert repeat["id"] == again["id"]  # within retention: the same task, not a new one
            assert message_text(wait_terminal(client, again["id"])) == "second"
    finally:
        server.stop()


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_store_false_is_not_retained(client: httpx.Client, server: ServerProcess) -> None:
    result = create(client, {"input": "SAY not kept", "store": False})
    assert result["store"] is False and message_text(result) == "not kept"
    assert client.get(f"/v1/responses/{result['id']}").status_code == 404
    assert client.get(f"/v1/responses/{result['id']}/input_items").status_code == 404
    session = client.get(f"/v1/sessions/{result['metadata']['session_id']}").json()
    assert "not kept" not in str(session)  # not even as the session's title
    # Cancelling it now succeeds and changes nothing (Sessions §4).
    cancelled = client.post(f"/v1/responses/{result['id']}/cancel")
    assert cancelled.status_code == 200
    validate("Response", cancelled.json())
    assert cancelled.json()["status"] == "completed"
    [(events,)] = query(
        server.database, "SELECT count(*) FROM event WHERE response_id = :id", id=result["id"]
    )
    [row] = query(
        server.database, "SELECT final, input_items FROM response WHERE id = :id", id=result["id"]
    )
    assert events == 0
    assert row[0] in (None, "null") and row[1] in ("[]", [])  # JSON text, or JSON parsed


def agent_home(server: ServerProcess, response: dict[str, Any]) -> Path:
    return server.data_dir / "sessions" / response["metadata"]["session_id"] / "home"


def files_holding(home: Path, *markers: str) -> dict[str, list[str]]:
    """Each marker's files under `home` that contain it, by content (links not followed)."""
    found: dict[str, list[str]] = {marker: [] for marker in markers}
    for folder, _, names in os.walk(home):
        for name in names:
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            for marker in markers:
                if marker.encode() in data:
                    found[marker].append(str(path.relative_to(home)))
    return found


def test_a_store_false_turn_leaves_nothing_of_its_conversation_in_the_agent_home(
    client: httpx.Client, server: ServerProcess, provider: RunningProvider
) -> None:
    """The CLI's own transcripts, histories and logs of a `store: false` turn are gone once it
    ends, in a new session and in the middle of a kept one, whose conversation goes on as it
    was before that turn (the model never sees the unkept turn again)."""
    tag = uuid.uuid4().hex[:12]
    kept, asked, said = f"kept{tag}", f"unkept-prompt-{tag}", f"unkept-reply-{tag}"

    # A new session whose first turn is not kept.
    alone = create(client, {"input": f"{asked}-1\nSAY {said}-1", "store": False})
    assert alone["status"] == "completed" and message_text(alone) == f"{said}-1"
    # The session goes on (a turn waits for the one before it to be cleared away).
    after_alone = create(client, {"input": "SAY still here", "previous_response_id": alone["id"]})
    assert message_text(after_alone) == "still here"
    left = files_holding(agent_home(server, alone), f"{asked}-1", f"{said}-1")
    assert left == {f"{asked}-1": [], f"{said}-1": []}, left

    # A kept conversation with a turn that is not kept in the middle.
    first = create(client, {"input": f"REMEMBER {kept}"})
    assert message_text(first) == f"noted {kept}"
    unkept = create(
        client,
        {"input": f"{asked}-2\nSAY {said}-2", "store": False, "previous_response_id": first["id"]},
    )
    assert unkept["status"] == "completed" and message_text(unkept) == f"{said}-2"
    provider.reset()
    recalled = create(client, {"input": "RECALL", "previous_response_id": unkept["id"]})
    assert message_text(recalled) == f"you said {kept}"  # the kept conversation goes on
    assert not any(asked in str(request["body"]) for request in provider.requests())
    left = files_holding(agent_home(server, first), kept, f"{asked}-2", f"{said}-2")
    assert left[kept], "the kept conversation must stay where its CLI keeps it"
    assert left[f"{asked}-2"] == [] and left[f"{said}-2"] == [], left


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_delete_never_cancels_a_running_task(client: httpx.Client, server: ServerProcess) -> None:
    accepted = create(client, {"input": "SLOW 3\nSAY finishes anyway", "background": True})
    rid = accepted["id"]
    deleted = client.delete(f"/v1/responses/{rid}")
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert client.get(f"/v1/responses/{rid}").status_code == 404
    assert client.delete(f"/v1/responses/{rid}").status_code == 404
    session_id = accepted["metadata"]["session_id"]
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        [(status, active)] = query(
            server.database,
            "SELECT status, active_response_id FROM session WHERE id = :id",
            id=session_id,
        )
        if active is None:
            break
        time.sleep(0.2)
    assert status == "completed"  # it ran to the end, uncancelled
