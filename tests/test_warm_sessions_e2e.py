"""A continued session starts warm (`uhpserver_keepWarmSeconds`): end to end, with the base
under test's real CLI in the real sandbox and the scripted provider.

A harness that keeps its sessions warm leaves the session's CLI process running after a
completed turn; the session's next turn goes on in that same process (same pid), with the
same answer a cold turn gives; no other session gets it; it ends on idle timeout, a cancel
and the session's deletion; and a harness that does not ask for it keeps nothing running.
On a base whose CLI cannot hold several turns (`keeps_warm` False) the same harness stays
cold, which is asserted instead.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.support.base_under_test import BASE
from tests.support.sandbox_processes import sandbox_processes
from tests.support.server import ServerProcess
from tests.test_tasks_e2e import create, message_text

pytestmark = pytest.mark.slow

WARMS = BASE.base.keeps_warm
LOCAL = os.environ.get("UHP_TEST_SANDBOX", "local") == "local"


def harness(client: httpx.Client, keep_warm: int | None) -> str:
    body: dict[str, Any] = {"name": f"warm-{uuid.uuid4().hex[:6]}", "base": BASE.name}
    if BASE.base_config is not None:  # the `acp` base: the agent under test
        body["uhpserver_baseConfig"] = BASE.base_config
    if keep_warm is not None:
        body["uhpserver_keepWarmSeconds"] = keep_warm
    made = client.post("/v1/harnesses", json=body)
    assert made.status_code in (200, 201), made.text
    return str(made.json()["id"])


def turn(client: httpx.Client, harness_id: str, text: str, after: str | None = None) -> dict:
    body: dict[str, Any] = {"input": text, "metadata": {"harness_id": harness_id}}
    if after is not None:
        body["previous_response_id"] = after
    answer = create(client, body)
    assert answer["status"] == "completed", answer
    return answer


def pids(session_id: str) -> set[int]:
    """The host pids of the session's sandbox processes (local sandbox: bwrap and below)."""
    return {int(line.split()[0]) for line in sandbox_processes(session_id)}


def wait_gone(session_id: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while pids(session_id) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids(session_id) == set(), "the session's process must be gone"


needs_local = pytest.mark.skipif(not LOCAL, reason="finds the processes of the local sandbox")


@needs_local
def test_a_warm_session_goes_on_in_the_same_process_with_the_cold_answer(
    client: httpx.Client,
) -> None:
    warm, cold = harness(client, 600), harness(client, None)
    answers = {}
    for name, harness_id in (("warm", warm), ("cold", cold)):
        first = turn(client, harness_id, "REMEMBER marigold")
        session = first["metadata"]["session_id"]
        kept = pids(session)
        if name == "warm" and WARMS:
            assert kept, "the completed turn's process stays warm"
        else:
            wait_gone(session)
        second = turn(client, harness_id, "RECALL", after=first["id"])
        assert second["metadata"]["session_id"] == session
        if name == "warm" and WARMS:
            assert pids(session) == kept, "the second turn ran in the same process"
        answers[name] = (message_text(first), message_text(second))
        client.delete(f"/v1/sessions/{session}")
    assert answers["warm"] == answers["cold"] == ("noted marigold", "you said marigold")


@needs_local
def test_another_session_never_gets_the_warm_process(
    client: httpx.Client, server: ServerProcess, other_key: str
) -> None:
    warm = harness(client, 600)
    first = turn(client, warm, "SAY one")
    session = first["metadata"]["session_id"]
    kept = pids(session)
    other = turn(client, warm, "SAY two")  # a new session of the same harness
    other_session = other["metadata"]["session_id"]
    assert other_session != session
    if WARMS:
        assert pids(session) == kept, "the first session's process is untouched"
        assert pids(other_session).isdisjoint(kept)
    # Another principal cannot continue the session at all, and leaves its process alone.
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {other_key}"}, timeout=60
    ) as stranger:
        refused = stranger.post(
            "/v1/responses", json={"input": "SAY mine", "previous_response_id": first["id"]}
        )
        assert refused.status_code == 404
    assert pids(session) == kept
    for gone in (session, other_session):
        assert client.delete(f"/v1/sessions/{gone}").status_code == 200
        wait_gone(gone)


@needs_local
def test_idle_timeout_ends_the_warm_process_and_the_next_turn_starts_cold(
    client: httpx.Client,
) -> None:
    short = harness(client, 2)
    first = turn(client, short, "REMEMBER tulip")
    session = first["metadata"]["session_id"]
    if WARMS:
        assert pids(session)
    wait_gone(session, timeout=2 + 15)
    second = turn(client, short, "RECALL", after=first["id"])
    assert message_text(second) == "you said tulip"  # cold, from the session's files
    client.delete(f"/v1/sessions/{session}")


@needs_local
def test_a_cancel_and_a_delete_end_the_warm_process(client: httpx.Client) -> None:
    warm = harness(client, 600)
    first = turn(client, warm, "SAY cancel me")
    session = first["metadata"]["session_id"]
    if WARMS:
        assert pids(session)
    cancelled = client.post(f"/v1/sessions/{session}/cancel")
    assert cancelled.status_code == 200
    wait_gone(session)
    again = turn(client, warm, "SAY back", after=first["id"])
    assert message_text(again) == "back"
    if WARMS:
        assert pids(session)
    # Cancelling the completed response that left the process warm ends it too.
    assert client.post(f"/v1/responses/{again['id']}/cancel").status_code == 200
    wait_gone(session)
    third = turn(client, warm, "SAY once more", after=again["id"])
    if WARMS:
        assert pids(session)
    assert client.delete(f"/v1/sessions/{session}").status_code == 200
    wait_gone(session)
    assert third["status"] == "completed"


@needs_local
def test_changing_the_harness_ends_its_warm_processes(client: httpx.Client) -> None:
    warm = harness(client, 600)
    first = turn(client, warm, "SAY before")
    session = first["metadata"]["session_id"]
    if WARMS:
        assert pids(session)
    current = client.get(f"/v1/harnesses/{warm}").json()
    changed = client.put(
        f"/v1/harnesses/{warm}", json={**current, "systemPrompt": "Answer tersely."}
    )
    assert changed.status_code == 200, changed.text
    wait_gone(session)
    client.delete(f"/v1/sessions/{session}")


@needs_local
def test_off_by_default_nothing_stays_running(client: httpx.Client) -> None:
    plain = harness(client, None)
    assert "uhpserver_keepWarmSeconds" not in client.get(f"/v1/harnesses/{plain}").json()
    first = turn(client, plain, "SAY cold")
    session = first["metadata"]["session_id"]
    wait_gone(session)
    client.delete(f"/v1/sessions/{session}")


@needs_local
def test_a_turn_bringing_files_starts_cold_and_sees_them(client: httpx.Client) -> None:
    warm = harness(client, 600)
    first = turn(client, warm, "SAY before the file")
    session = first["metadata"]["session_id"]
    kept = pids(session)
    note = "data:text/plain;base64," + base64.b64encode(b"warm or cold\n").decode()
    body = {
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "RUN cat note.txt\nSAY {output}"},
                    {"type": "input_file", "filename": "note.txt", "file_data": note},
                ],
            }
        ],
        "metadata": {"harness_id": warm},
        "previous_response_id": first["id"],
    }
    second = create(client, body)
    assert second["status"] == "completed", second
    assert message_text(second).strip() == "warm or cold"  # the agent read the placed file
    if WARMS:
        assert pids(session).isdisjoint(kept), "a turn bringing files starts a new process"
    client.delete(f"/v1/sessions/{session}")
    wait_gone(session)
