"""Several replicas behave as one server behind a load balancer (issue 13 §3): real
`uhp-server serve` processes on one PostgreSQL database and one data directory, behind a real
haproxy (tests/support/replicas.py). Every request goes through the balancer; a test that needs
a given replica pins it with a header the balancer routes on. (tests/test_replicas_e2e.py asks
each replica on its own port.)"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, TEST_REPLICAS, server_env
from tests.support.replicas import Replicas
from tests.support.schema import check_stream, validate
from tests.support.sse import Stream, parse_lines, read_stream
from tests.test_sessions_e2e import agent_processes, first_delta, wait_no_agents
from tests.test_tasks_e2e import message_text, wait_terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        TEST_REPLICAS < 2,
        reason="the several-replicas pass runs it (UHP_TEST_REPLICAS=2, scripts/test.sh)",
    ),
]

# A replica whose heartbeat stops is given up for dead this soon, so the kill -9 test waits
# seconds, not the production default.
LEASE_ENV = {"UHP_REPLICA_LEASE_SECONDS": "3"}


@pytest.fixture
def replicas(server: Replicas) -> Replicas:
    """The shared server: in the several-replicas pass, the replicas behind haproxy."""
    return server


@pytest.fixture
def balancer(replicas: Replicas) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=replicas.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
    ) as http:
        yield http


def start_on(client: httpx.Client, replicas: Replicas, name: str, text: str) -> str:
    """A background task accepted (and so run) by replica `name`; its id."""
    answer = client.post(
        "/v1/responses", json={"input": text, "background": True}, headers=replicas.pin(name)
    )
    assert answer.status_code == 200, answer.text
    assert Replicas.served_by(answer) == name
    validate("Response", answer.json())
    return str(answer.json()["id"])


def test_a_stream_from_the_replica_that_does_not_run_the_turn_is_gapless_and_live(
    balancer: httpx.Client, replicas: Replicas
) -> None:
    rid = start_on(balancer, replicas, "r0", "SLOW 4\nSAY " + "tail " * 40)
    arrivals: list[float] = []
    with balancer.stream(
        "GET", f"/v1/responses/{rid}?stream=true", headers=replicas.pin("r1")
    ) as response:
        assert response.status_code == 200 and Replicas.served_by(response) == "r1"
        live = Stream()

        def lines() -> Iterator[str]:
            for line in response.iter_lines():
                if line == "":  # an event ends on a blank line
                    arrivals.append(time.monotonic())
                yield line

        parse_lines(lines(), live)
    final = check_stream(live.events)  # every sequence number from 0, one terminal event
    assert final["status"] == "completed" and message_text(final) == ("tail " * 40).strip()
    # Live, not one batch at the end: the deltas of a four-second answer arrive spread out.
    assert arrivals[-1] - arrivals[0] > 2, "events arrived all at once"
    owner = read_stream(
        balancer, "GET", f"/v1/responses/{rid}?stream=true", headers=replicas.pin("r0")
    )
    assert owner.events == live.events
    after = 5
    tail = read_stream(
        balancer,
        "GET",
        f"/v1/responses/{rid}?stream=true&starting_after={after}",
        headers=replicas.pin("r1"),
    )
    assert tail.events == live.events[after + 1 :]


def test_a_replay_from_the_other_replica_resumes_a_running_turn_without_a_gap(
    balancer: httpx.Client, replicas: Replicas
) -> None:
    rid = start_on(balancer, replicas, "r1", "SLOW 4\nSAY " + "resume " * 40)
    first_delta(balancer, rid)
    # Resumed on r0 while r1 still writes: what r0 has not seen yet arrives from its tail.
    resumed = read_stream(
        balancer,
        "GET",
        f"/v1/responses/{rid}?stream=true",
        headers={**replicas.pin("r0"), "Last-Event-ID": "2"},
    )
    whole = read_stream(
        balancer, "GET", f"/v1/responses/{rid}?stream=true", headers=replicas.pin("r1")
    )
    check_stream(whole.events)
    assert resumed.events == whole.events[3:]


def test_a_cancel_sent_to_the_other_replica_stops_the_turn_within_a_second(
    balancer: httpx.Client, replicas: Replicas
) -> None:
    rid = start_on(balancer, replicas, "r0", "SLOW 20\nSAY " + "word " * 60)
    first_delta(balancer, rid)
    if os.environ.get("UHP_TEST_SANDBOX", "local") == "local":
        assert agent_processes(replicas.data_dir), "the running sandbox must be visible"
    started = time.monotonic()
    cancelled = balancer.post(f"/v1/responses/{rid}/cancel", headers=replicas.pin("r1"))
    assert time.monotonic() - started < 1.0
    assert cancelled.status_code == 200, cancelled.text
    assert Replicas.served_by(cancelled) == "r1"
    body = cancelled.json()
    validate("Response", body)
    assert body["status"] == "cancelled" and message_text(body).startswith("word")
    for name in ("r0", "r1"):
        seen = balancer.get(f"/v1/responses/{rid}", headers=replicas.pin(name)).json()
        assert seen == body
    wait_no_agents(replicas.data_dir)  # the turn really stopped, on the replica that ran it


def test_idempotency_and_session_busy_hold_across_replicas(
    balancer: httpx.Client, replicas: Replicas
) -> None:
    key = {"Idempotency-Key": "one-task-whichever-replica"}
    body = {"input": "SLOW 2\nSAY once", "background": True}
    first = balancer.post("/v1/responses", json=body, headers={**key, **replicas.pin("r0")})
    again = balancer.post("/v1/responses", json=body, headers={**key, **replicas.pin("r1")})
    assert first.status_code == again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    rid = first.json()["id"]
    busy = balancer.post(
        "/v1/responses",
        json={"input": "SAY too soon", "previous_response_id": rid},
        headers=replicas.pin("r1"),
    )
    assert busy.status_code == 409, busy.text
    assert wait_terminal(balancer, rid)["status"] == "completed"


# -- kill -9 ---------------------------------------------------------------------------------


@dataclass
class Watched:
    """One streaming task and every event its client was sent (so acknowledged)."""

    word: str
    replica: str = ""
    response_id: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    broke: BaseException | None = None
    started: threading.Event = field(default_factory=threading.Event)

    @property
    def input(self) -> str:
        return "SLOW 12\nSAY " + f"{self.word} " * 50


def watch(url: str, watched: Watched) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    try:
        with (
            httpx.Client(base_url=url, headers=headers, timeout=120) as client,
            client.stream(
                "POST", "/v1/responses", json={"input": watched.input, "stream": True}
            ) as response,
        ):
            assert response.status_code == 200
            watched.replica = Replicas.served_by(response)

            def lines() -> Iterator[str]:
                for line in response.iter_lines():
                    if watched.events and not watched.response_id:
                        watched.response_id = watched.events[0]["response"]["id"]
                    if len(watched.events) >= 6:
                        watched.started.set()
                    yield line

            parse_lines(lines(), Stream(events=watched.events))
    except (httpx.HTTPError, AssertionError) as error:
        watched.broke = error
    finally:
        watched.started.set()


def descendants(pid: int) -> set[int]:
    """Every process below `pid` in the process table (from /proc, as `ps` reads it)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_kill_9_of_a_replica_mid_stream_loses_nothing_acknowledged(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    replicas = Replicas(tmp_path, server_env(provider, **LEASE_ENV)).start()
    try:
        watched = [Watched(f"part{n}") for n in range(4)]
        threads = [threading.Thread(target=watch, args=(replicas.url, w)) for w in watched]
        for thread in threads:
            thread.start()
            time.sleep(0.3)  # round-robin: the streams alternate between the replicas
        for w in watched:
            assert w.started.wait(120) and w.broke is None, (w.broke, replicas.log())
        assert {w.replica for w in watched} == {"r0", "r1"}
        victim_pid = replicas.replica("r0").pid
        victim_agents = descendants(victim_pid)
        assert victim_agents, "the victim's agents must be visible before the kill"

        replicas.kill("r0")
        # Promptly, while the survivor still runs its own: they die with their server.
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in victim_agents) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in victim_agents if alive(pid)]
        assert left == [], f"the dead replica's agents still run: {left}"

        for thread in threads:
            thread.join(120)
        with httpx.Client(
            base_url=replicas.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
        ) as client:
            for w in watched:
                final = wait_terminal(client, w.response_id, timeout=90)
                replay = read_stream(client, "GET", f"/v1/responses/{w.response_id}?stream=true")
                check_stream(replay.events)
                # Every event a client was sent is still there, in order, with its number.
                assert replay.events[: len(w.events)] == w.events
                if w.replica == "r1":  # the survivor's own turns run on to the end
                    assert w.broke is None and final["status"] == "completed"
                    assert replay.events == w.events
                else:  # the dead replica's turns end failed, their partial output kept
                    assert final["status"] == "failed", final
                    assert final["error"] is not None
                    assert message_text(final).startswith(w.word)
            # The survivor takes every new task.
            after = client.post("/v1/responses", json={"input": "SAY still serving"})
            assert after.status_code == 200 and message_text(after.json()) == "still serving"
        wait_no_agents(replicas.data_dir)
    finally:
        replicas.stop()
