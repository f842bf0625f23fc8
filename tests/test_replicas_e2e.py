"""Two replicas on one PostgreSQL database behave as one server (issue 13 §3): real
`uhp-server serve` processes sharing a data folder and a database, each asked directly on
its own port, the real Codex CLI in the local sandbox, the scripted provider."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, server_env
from tests.support import postgres
from tests.support.schema import check_stream
from tests.support.server import ServerProcess
from tests.support.sse import read_stream
from tests.test_sessions_e2e import first_delta, wait_no_agents
from tests.test_tasks_e2e import create, message_text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        postgres.TEST_DATABASE != "postgresql",
        reason="replicas share a PostgreSQL database: the PostgreSQL pass runs these",
    ),
]

LEASE_SECONDS = 3
SLOW_TURN = {"input": "SLOW 8\nSAY " + "partial " * 60, "background": True}


def _client(server: ServerProcess) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
    )


def _replica(data_dir: Path, provider: Any, name: str, **extra: str) -> ServerProcess:
    env = server_env(
        provider,
        UHP_REPLICA_ID=name,
        UHP_REPLICA_LEASE_SECONDS=str(LEASE_SECONDS),
        **extra,
    )
    return ServerProcess(data_dir, env)


@pytest.fixture
def pair(tmp_path: Path, provider: Any, base_installed: Path) -> Iterator[list[ServerProcess]]:
    """Replicas `a` and `b`, started; stopped (whatever is left of them) at the end."""
    started = [_replica(tmp_path, provider, name).start() for name in ("a", "b")]
    yield started
    for replica in started:
        replica.stop()


def _wait_status(client: httpx.Client, response_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/v1/responses/{response_id}").json()
        if body["status"] != "in_progress" or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def _wait_output(client: httpx.Client, response_id: str, kind: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        current = client.get(f"/v1/responses/{response_id}").json()
        if any(item["type"] == kind for item in current["output"]):
            return
        time.sleep(0.1)
    raise AssertionError(f"no {kind} arrived")


def test_a_replica_starting_leaves_the_others_turn_running_and_streams_it_live(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    a = _replica(tmp_path, provider, "a").start()
    b = _replica(tmp_path, provider, "b")
    try:
        with _client(a) as on_a:
            # A model call before b starts and one after: b's start must leave a's turn,
            # its sandbox and its door to the gateway as they were.
            running = create(
                on_a, {"input": "RUN sleep 8\nSLOW 3\nSAY after the wait", "background": True}
            )
            _wait_output(on_a, running["id"], "function_call")
            b.start()  # its start-up recovery must not end a's live turn
            with _client(b) as on_b:
                live = read_stream(on_b, "GET", f"/v1/responses/{running['id']}?stream=true")
                final = on_a.get(f"/v1/responses/{running['id']}").json()
                assert final["status"] == "completed", (final["error"], final["output"])
                assert message_text(final) == "after the wait"
                assert live.events[-1]["type"] == "response.completed"
                assert check_stream(live.events) == final
                # The same events, in order, as the replica that ran the turn sends them.
                here = read_stream(on_a, "GET", f"/v1/responses/{running['id']}?stream=true")
                assert live.events == here.events
    finally:
        a.stop()
        b.stop()


def test_a_replay_from_the_middle_follows_on_the_other_replica(
    pair: list[ServerProcess],
) -> None:
    a, b = pair
    with _client(a) as on_a, _client(b) as on_b:
        running = create(on_a, SLOW_TURN)
        first_delta(on_a, running["id"])
        seen = read_stream(on_a, "GET", f"/v1/responses/{running['id']}?stream=true", 3)
        after = seen.events[-1]["sequence_number"]
        url = f"/v1/responses/{running['id']}?stream=true&starting_after={after}"
        rest = read_stream(on_b, "GET", url).events
        assert rest[0]["sequence_number"] == after + 1
        assert rest[-1]["type"] == "response.completed"
        whole = read_stream(on_a, "GET", f"/v1/responses/{running['id']}?stream=true").events
        assert whole[after + 1 :] == rest


def test_a_cancel_on_the_other_replica_stops_the_turn_where_it_runs(
    pair: list[ServerProcess],
) -> None:
    a, b = pair
    with _client(a) as on_a, _client(b) as on_b:
        running = create(on_a, {**SLOW_TURN, "input": "SLOW 30\nSAY " + "word " * 80})
        first_delta(on_a, running["id"])
        started = time.monotonic()
        cancelled = on_b.post(f"/v1/responses/{running['id']}/cancel").json()
        elapsed = time.monotonic() - started
        assert cancelled["status"] == "cancelled", cancelled
        assert elapsed < 2.0, f"the cancel took {elapsed:.2f} s"
        assert message_text(cancelled).startswith("word")
        assert on_a.get(f"/v1/responses/{running['id']}").json() == cancelled
        wait_no_agents(a.data_dir)  # the agent stopped on the replica that ran it
        # A session's cancel, too: the next turn runs on a, the cancel is asked of b.
        session_id = cancelled["metadata"]["session_id"]
        follow = create(
            on_a, {**SLOW_TURN, "input": "SLOW 30\nSAY more", "previous_response_id": running["id"]}
        )
        first_delta(on_a, follow["id"])
        answer = on_b.post(f"/v1/sessions/{session_id}/cancel").json()
        assert answer["status"] == "cancelled", answer
        assert answer["cancelled_response_id"] == follow["id"]
        assert on_a.get(f"/v1/responses/{follow['id']}").json()["status"] == "cancelled"


def test_one_idempotency_key_sent_to_both_replicas_at_once_runs_one_task(
    pair: list[ServerProcess],
) -> None:
    a, b = pair
    body = {"input": "SLOW 3\nSAY once"}
    answers: dict[str, httpx.Response] = {}

    def send(replica: ServerProcess) -> None:
        with _client(replica) as http:
            answers[replica.url] = http.post(
                "/v1/responses", json=body, headers={"Idempotency-Key": "same-key"}
            )

    threads = [threading.Thread(target=send, args=(replica,)) for replica in pair]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    first, second = (answers[a.url], answers[b.url])
    assert first.status_code == second.status_code == 200, (first.text, second.text)
    # One run; both wait for it (the one on the replica that does not run it, too).
    assert first.json()["id"] == second.json()["id"]
    assert first.json()["status"] == second.json()["status"] == "completed"
    assert message_text(second.json()) == "once"


def test_two_turns_for_one_session_on_two_replicas_one_is_busy(
    pair: list[ServerProcess],
) -> None:
    a = pair[0]
    with _client(a) as on_a:
        first = create(on_a, {"input": "SAY first"})
    body = {"input": "SLOW 4\nSAY next", "previous_response_id": first["id"]}
    answers: list[httpx.Response] = []

    def send(replica: ServerProcess) -> None:
        with _client(replica) as http:
            answers.append(http.post("/v1/responses", json={**body, "background": True}))

    threads = [threading.Thread(target=send, args=(replica,)) for replica in pair]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [200, 409], [answer.text for answer in answers]
    busy = next(answer for answer in answers if answer.status_code == 409).json()
    assert busy["error"]["code"] == "session_busy"
    assert "retry_after_ms" not in (busy["error"].get("detail") or {})


def test_a_replica_killed_mid_turn_has_its_turn_failed_by_the_other(
    pair: list[ServerProcess],
) -> None:
    a, b = pair
    with _client(a) as on_a, _client(b) as on_b:
        running = create(on_a, {**SLOW_TURN, "input": "SLOW 60\nSAY " + "partial " * 80})
        first_delta(on_a, running["id"])
        tail: list[dict[str, Any]] = []
        url = f"/v1/responses/{running['id']}?stream=true"
        reader = threading.Thread(target=lambda: tail.extend(read_stream(on_b, "GET", url).events))
        reader.start()
        time.sleep(0.5)
        a.stop(signal.SIGKILL)
        killed = time.monotonic()
        wait_no_agents(a.data_dir)  # the local sandbox died with its server
        reader.join(LEASE_SECONDS * 5)
        after = _wait_status(on_b, running["id"], LEASE_SECONDS * 5)
        assert after["status"] == "failed", after
        assert time.monotonic() - killed < LEASE_SECONDS * 5
        assert after["error"]["code"] == "harness_error"
        assert message_text(after).startswith("partial")
        assert tail and tail[-1]["type"] == "response.failed"
        assert check_stream(tail) == after
        # Its session is free again, on the surviving replica.
        follow = create(on_b, {"input": "SAY next", "previous_response_id": running["id"]})
        assert follow["status"] == "completed"


def test_the_turn_limit_holds_across_replicas_in_arrival_order(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    limit = {"UHP_MAX_CONCURRENT_TURNS": "1"}
    a = _replica(tmp_path, provider, "a", **limit).start()
    b = _replica(tmp_path, provider, "b", **limit).start()
    try:
        with _client(a) as on_a, _client(b) as on_b:
            first = create(on_a, {**SLOW_TURN, "input": "SLOW 10\nSAY " + "first " * 40})
            first_delta(on_a, first["id"])
            second = create(on_b, {**SLOW_TURN, "input": "SAY second"})
            third = create(on_a, {**SLOW_TURN, "input": "SAY third"})
            # b's turn waits for a's slot (one turn at a time over both replicas), and
            # a's second one waits behind it: each starts in the order they arrived.
            time.sleep(2)
            assert on_a.get(f"/v1/responses/{first['id']}").json()["status"] == "in_progress"
            assert on_b.get(f"/v1/responses/{second['id']}").json()["output"] == []
            turns = {"first": (on_a, first), "second": (on_b, second), "third": (on_a, third)}
            order: list[str] = []
            deadline = time.monotonic() + 120
            while len(order) < 3 and time.monotonic() < deadline:
                for name, (client, response) in turns.items():
                    body = client.get(f"/v1/responses/{response['id']}").json()
                    if name not in order and body["output"]:
                        order.append(name)
                time.sleep(0.1)
            assert order == ["first", "second", "third"]
            for client, response in turns.values():
                assert _wait_status(client, response["id"], 120)["status"] == "completed"
    finally:
        a.stop()
        b.stop()


def test_the_containers_of_a_killed_replica_are_reaped_by_the_one_expiring_its_lease(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    from tests.support.docker import engine_or_skip, is_ready_slot, runtime_image_or_skip

    image = runtime_image_or_skip()
    api = engine_or_skip()
    docker = {"UHP_SANDBOX": "docker"}
    a = _replica(tmp_path, provider, "a", **docker).start(timeout=120)
    b = _replica(tmp_path, provider, "b", **docker).start(timeout=120)

    def plant(owner: str) -> str:
        """A container of `owner` that outlives its server (e.g. an engine's live-restore)."""
        planted = api.create_container(
            image,
            command=["sleep", "600"],
            labels={"uhp.server": owner},
            host_config=api.create_host_config(network_mode="none"),
        )["Id"]
        api.start(planted)
        return str(planted)

    def of(owner: str, ready_slots: bool = True) -> list[str]:
        """`owner`'s containers (without `ready_slots`, not its ready pool's unused ones)."""
        found = api.containers(all=True, filters={"label": f"uhp.server={owner}"})
        return [c["Id"] for c in found if ready_slots or not is_ready_slot(c)]

    survivor = plant("b")
    try:
        with _client(a) as on_a, _client(b) as on_b:
            running = create(on_a, {**SLOW_TURN, "input": "SLOW 60\nSAY " + "partial " * 80})
            first_delta(on_a, running["id"])
            plant("a")
            assert len(of("a", ready_slots=False)) == 2  # the turn's own and the planted one
            a.stop(signal.SIGKILL)
            after = _wait_status(on_b, running["id"], LEASE_SECONDS * 5)
            assert after["status"] == "failed", after
            deadline = time.monotonic() + LEASE_SECONDS * 5
            while of("a") and time.monotonic() < deadline:
                time.sleep(0.2)
            assert of("a") == []
            assert survivor in of("b")  # another live replica's containers are left alone
    finally:
        a.stop()
        b.stop()
        for leftover in of("a") + of("b"):
            api.remove_container(leftover, force=True)
