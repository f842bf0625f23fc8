"""The several-replicas half of bench/scale.py: real `uhp-server serve` processes on one
PostgreSQL behind Debian's haproxy (tests/support/replicas.py), the real Codex CLI and the
scripted model provider.

- Throughput: short blocking tasks through the balancer, one replica behind it ÷ two, rounds
  alternating so a busy machine slows both alike.
- Cross-replica delay: a task runs on replica r0 while one client streams it from r0 and
  another from r1 (both through the balancer, pinned by header); for every event that arrived
  live, the time it reached the r1 client minus the time it reached the r0 client. The owner
  publishes an event to its own clients once its append committed, so this is the time from
  the append to a client of the other replica, less the owner's own (sub-millisecond, local)
  delivery: a slight underestimate, named as such in the output. Beside it, the same with
  both clients on r0: what two clients in one process, through one haproxy, differ by anyway.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.conftest import API_KEY, server_env
from tests.scripted_provider import RunningProvider
from tests.support.replicas import Replicas

HEADERS = {"Authorization": f"Bearer {API_KEY}"}


def throughput(replicas: Replicas, tasks: int, concurrency: int) -> float:
    """Tasks per second: `tasks` short blocking tasks through the balancer, `concurrency` at a
    time."""

    def one(client: httpx.Client) -> None:
        answer = client.post("/v1/responses", json={"input": "SAY done"})
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text

    with httpx.Client(base_url=replicas.url, headers=HEADERS, timeout=300) as client:
        one(client)  # warm: the CLI's first start reads its files from disk
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda _: one(client), range(tasks)))
        return tasks / (time.perf_counter() - started)


@dataclass
class Arrivals:
    """When each event (by sequence number) reached one client, and when its stream opened."""

    opened: float = 0.0
    at: dict[int, float] = field(default_factory=dict)


def follow(url: str, response_id: str, replica: str, into: Arrivals) -> None:
    with (
        httpx.Client(base_url=url, headers=HEADERS, timeout=300) as client,
        client.stream(
            "GET", f"/v1/responses/{response_id}?stream=true", headers={"X-Test-Replica": replica}
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        into.opened = time.perf_counter()
        for line in response.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                into.at[event["sequence_number"]] = time.perf_counter()


def stream_delays(replicas: Replicas, tasks: int, second: str) -> list[float]:
    """Seconds from each live event of a turn running on r0 reaching a client of r0 to
    reaching a second client, of replica `second`, over `tasks` streamed tasks. (With `second`
    r0 too, what the measurement itself adds: two clients of one replica.)"""
    delays: list[float] = []
    with httpx.Client(base_url=replicas.url, headers=HEADERS, timeout=300) as client:
        for _ in range(tasks):
            answer = client.post(
                "/v1/responses",
                json={"input": "SLOW 3\nSAY " + "word " * 80, "background": True},
                headers=replicas.pin("r0"),
            )
            assert answer.status_code == 200, answer.text
            owner, other = Arrivals(), Arrivals()
            readers = [
                threading.Thread(target=follow, args=(replicas.url, answer.json()["id"], r, a))
                for r, a in (("r0", owner), (second, other))
            ]
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join()
            missing = set(owner.at) - set(other.at)
            assert not missing, f"{second}'s client never got events {sorted(missing)}"
            # Only events sent live to both: the ones before both streams opened were replays.
            live_from = max(owner.opened, other.opened) + 0.05
            delays += [other.at[s] - t for s, t in owner.at.items() if t > live_from]
    return delays


def run(provider: RunningProvider, tasks: int, concurrency: int, rounds: int, streams: int) -> str:
    """Every measurement of the several-replicas half; the summary lines to print."""
    rates: dict[int, list[float]] = {1: [], 2: []}
    delays: dict[str, list[float]] = {"r1": [], "r0": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(rounds):
            for count in rates:
                data_dir = Path(tmp) / f"replicas{count}-{n}"
                replicas = Replicas(data_dir, server_env(provider), count=count).start()
                try:
                    rate = throughput(replicas, tasks, concurrency)
                    if count == 2:
                        for second, found in delays.items():
                            found += stream_delays(replicas, streams, second)
                except Exception:
                    print(replicas.log()[-6000:], flush=True)  # why, before the folder goes
                    raise
                finally:
                    replicas.stop()
                rates[count].append(rate)
                print(f"round {n + 1} {count} replica(s) {rate:7.2f} tasks/s", flush=True)
    one, two = (statistics.median(rates[k]) for k in (1, 2))
    return (
        f"median through haproxy: 1 replica {one:.2f} tasks/s, 2 replicas {two:.2f} tasks/s; "
        f"2 ÷ 1 = {two / one:.2f}\n"
        f"event reaching a client of the other replica, after one of its own: "
        f"{spread(delays['r1'])} (target p99 < 50 ms)\n"
        f"the same, both clients on the replica that runs the turn (the measurement's own "
        f"noise): {spread(delays['r0'])}"
    )


def spread(delays: list[float]) -> str:
    ordered = sorted(delays)

    def ms(quantile: float) -> float:
        return ordered[min(len(ordered) - 1, int(len(ordered) * quantile))] * 1000

    return (
        f"p50 {ms(0.5):.1f} ms, p90 {ms(0.9):.1f} ms, p99 {ms(0.99):.1f} ms, "
        f"max {ordered[-1] * 1000:.1f} ms ({len(ordered)} live events)"
    )
