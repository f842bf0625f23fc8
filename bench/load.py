"""Does the server keep answering while 50 tasks start at once?

One run, side by side:

- idle: `GET /v1/uhp` probed N times on a server with nothing running;
- loaded: 50 background tasks submitted at once (each streams its answer slowly, so every
  turn keeps writing deltas), `GET /v1/uhp` probed continuously while they start and stream,
  then all 50 cancelled concurrently: each cancel's latency and the status in its reply.

It starts the scripted provider and a real `uhp-server serve` (bubblewrap sandbox, real Codex
CLI). Usage:

    python bench/load.py [--tasks N] [--probes N] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

# tests/ is not an installed package: the bench borrows the test suite's helpers from the repo.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _smoke
from bench.overhead import wait_children_gone
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, installed_tools, server_env
from tests.scripted_provider import start_provider
from tests.support.server import ServerProcess

UHP_P99_TARGET_MS = 100.0
CANCEL_P99_TARGET_MS = 1000.0
PROBE_INTERVAL = 0.02  # seconds between the end of one discovery probe and the next
STREAMING_DEADLINE = 60.0  # how long the tasks get to start streaming before the cancel
# Long enough that no task finishes before it is cancelled; a delta every ~0.2 s per task.
TASK_PROMPT = "SLOW 120\nSAY " + "word " * 150


class BenchError(RuntimeError):
    """The load did not happen as planned; its numbers would mean nothing."""


@dataclass
class Loaded:
    probes_ms: list[float] = field(default_factory=list)
    probes_cancelling_ms: list[float] = field(default_factory=list)  # the part during cancels
    cancels_ms: list[float] = field(default_factory=list)
    cancel_statuses: list[str] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    streaming_at_cancel: int = 0
    seconds_to_streaming: float = 0.0


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


async def send(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request, sent again once when the connection was dropped under it (the server
    closes idle keep-alive connections; on a loaded machine a reuse can cross that close).
    Every request the bench repeats is idempotent: reads, cancels, keyed submissions."""
    try:
        return await http.request(method, url, **kwargs)
    except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError):
        return await http.request(method, url, **kwargs)


class Prober:
    """Probes `GET /v1/uhp` from a thread of its own with a blocking client, so what it
    measures is the server, not the bench's event loop busy with 50 tasks' requests."""

    def __init__(self, url: str) -> None:
        self._http = httpx.Client(base_url=url, timeout=60)
        self._stop = threading.Event()
        self.cancelling = threading.Event()
        self._thread: threading.Thread | None = None

    def once(self) -> float:
        started = time.perf_counter()
        try:
            response = self._http.get("/v1/uhp")
        except (httpx.ReadError, httpx.RemoteProtocolError):  # see send()
            response = self._http.get("/v1/uhp")
        if response.status_code != 200:
            raise BenchError(f"/v1/uhp answered {response.status_code}")
        return (time.perf_counter() - started) * 1000

    def series(self, count: int) -> list[float]:
        samples = []
        for _ in range(count):
            samples.append(self.once())
            time.sleep(PROBE_INTERVAL)
        return samples

    def start(self, loaded: Loaded) -> None:
        self._thread = threading.Thread(target=self._run, args=(loaded,), name="prober")
        self._thread.start()

    def _run(self, loaded: Loaded) -> None:
        while not self._stop.is_set():
            while_cancelling = self.cancelling.is_set()
            loaded.probes_ms.append(self.once())
            if while_cancelling:
                loaded.probes_cancelling_ms.append(loaded.probes_ms[-1])
            time.sleep(PROBE_INTERVAL)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._http.close()


async def submit(http: httpx.AsyncClient, into: list[float]) -> str:
    started = time.perf_counter()
    response = await send(
        http,
        "POST",
        "/v1/responses",
        json={"input": TASK_PROMPT, "background": True},
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )
    into.append((time.perf_counter() - started) * 1000)
    if response.status_code != 200:
        raise BenchError(f"submit answered {response.status_code}: {response.text}")
    return response.json()["id"]


async def streaming_count(http: httpx.AsyncClient, ids: list[str]) -> int:
    """How many tasks have started their answer (a message in their output)."""
    replies = await asyncio.gather(*(send(http, "GET", f"/v1/responses/{rid}") for rid in ids))
    count = 0
    for reply in replies:
        body = reply.json()
        if body["status"] != "in_progress":
            raise BenchError(f"a task ended before the cancel: {body['status']} {body['error']}")
        count += any(item["type"] == "message" for item in body["output"])
    return count


async def cancel(http: httpx.AsyncClient, rid: str, loaded: Loaded) -> None:
    started = time.perf_counter()
    response = await send(http, "POST", f"/v1/responses/{rid}/cancel")
    loaded.cancels_ms.append((time.perf_counter() - started) * 1000)
    if response.status_code != 200:
        raise BenchError(f"cancel answered {response.status_code}: {response.text}")
    loaded.cancel_statuses.append(response.json()["status"])


async def measure(
    url: str, tasks: int, probes: int, log: Callable[[str], None]
) -> tuple[list[float], Loaded]:
    limits = httpx.Limits(max_connections=tasks + 10, max_keepalive_connections=tasks + 10)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    prober = Prober(url)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as http:
        # Warm-up, not recorded; the first authenticated request creates the principal's
        # default harnesses, as a client's first call would.
        await asyncio.to_thread(prober.series, 20)
        (await http.get("/v1/harnesses")).raise_for_status()
        log(f"idle: {probes} probes of /v1/uhp")
        idle = await asyncio.to_thread(prober.series, probes)

        loaded = Loaded()
        prober.start(loaded)
        try:
            log(f"loaded: submitting {tasks} background tasks at once")
            started = time.perf_counter()
            ids = await asyncio.gather(*(submit(http, loaded.submit_ms) for _ in range(tasks)))
            deadline = started + STREAMING_DEADLINE
            while time.perf_counter() < deadline:
                loaded.streaming_at_cancel = await streaming_count(http, ids)
                if loaded.streaming_at_cancel == tasks:
                    break
                await asyncio.sleep(1.0)
            loaded.seconds_to_streaming = time.perf_counter() - started
            log(
                f"loaded: {loaded.streaming_at_cancel}/{tasks} streaming after "
                f"{loaded.seconds_to_streaming:.1f} s; cancelling all at once"
            )
            prober.cancelling.set()
            await asyncio.gather(*(cancel(http, rid, loaded) for rid in ids))
        finally:
            await asyncio.to_thread(prober.stop)
    return idle, loaded


def stats_row(name: str, values: list[float]) -> str:
    cells = [percentile(values, q) for q in (0.5, 0.9, 0.99)] + [max(values)]
    return f"{name:<28}{len(values):>6}" + "".join(f"{v:>10.1f}" for v in cells)


def report(idle: list[float], loaded: Loaded, tasks: int) -> str:
    header = f"{'':<28}{'n':>6}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}{'max ms':>10}"
    terminal = sum(status == "cancelled" for status in loaded.cancel_statuses)
    uhp_p99 = percentile(loaded.probes_ms, 0.99)
    cancel_p99 = percentile(loaded.cancels_ms, 0.99)

    def verdict(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    def ratio(q: float) -> str:
        return f"{percentile(loaded.probes_ms, q) / percentile(idle, q):.1f}"

    return "\n".join(
        [
            f"UHP server under load: {tasks} tasks started at once, "
            f"{loaded.streaming_at_cancel} streaming after {loaded.seconds_to_streaming:.1f} s "
            "when all were cancelled",
            "",
            header,
            "-" * len(header),
            stats_row("GET /v1/uhp idle", idle),
            stats_row("GET /v1/uhp loaded", loaded.probes_ms),
            stats_row("  of which while cancelling", loaded.probes_cancelling_ms or [0.0]),
            stats_row("POST /v1/responses (bg)", loaded.submit_ms),
            stats_row("POST …/cancel", loaded.cancels_ms),
            "",
            f"/v1/uhp loaded/idle: p50 {ratio(0.5)}x, p90 {ratio(0.9)}x, p99 {ratio(0.99)}x",
            f"cancel replies with status cancelled: {terminal}/{len(loaded.cancel_statuses)}"
            + (
                ""
                if terminal == len(loaded.cancel_statuses)
                else f" (others: {sorted(set(loaded.cancel_statuses) - {'cancelled'})})"
            ),
            "",
            f"/v1/uhp p99 under load {uhp_p99:.1f} ms, target < {UHP_P99_TARGET_MS:.0f} ms: "
            f"{verdict(uhp_p99 < UHP_P99_TARGET_MS)}",
            f"cancel p99 {cancel_p99:.1f} ms, target < {CANCEL_P99_TARGET_MS:.0f} ms with every "
            f"reply cancelled: "
            f"{verdict(cancel_p99 < CANCEL_P99_TARGET_MS and terminal == len(loaded.cancels_ms))}",
        ]
    )


def server_errors(log_text: str) -> str:
    """Each error line of the server's JSON log, shortened to its event and exception."""
    lines = []
    for line in log_text.splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if record.get("level") == "error":
                reason = (record.get("exception") or "").strip().splitlines()[-1:]
                lines.append(f"{record.get('event')}: {' '.join(reason)}")
    return "\n".join(lines[:20]) or "(none)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50, help="tasks started at once")
    parser.add_argument("--probes", type=int, default=200, help="idle /v1/uhp probes")
    parser.add_argument("--server-log", type=Path, help="keep a copy of the server's log here")
    parser.add_argument(
        "--admitted",
        type=int,
        help="UHP_MAX_CONCURRENT_TURNS for the server (default: --tasks, so every task really "
        "starts at once, as the target means; a smaller value measures the queue instead)",
    )
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(argv), tasks=2, probes=5)
    if args.tasks < 1 or args.probes < 1:
        parser.error("--tasks and --probes must be at least 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    installed_tools("codex")
    cache = Path.home() / ".cache" / "uhp-server"  # not /tmp: as in bench/overhead.py
    cache.mkdir(parents=True, exist_ok=True)
    try:
        with contextlib.ExitStack() as stack:
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=cache)))
            provider = start_provider(PROVIDER_KEY, MODELS)
            stack.callback(provider.stop)
            admitted = str(args.admitted or args.tasks)
            # The bench is one principal: its share of the slots is all of them (by default
            # one less, which would queue a task where the target means every one started).
            env = server_env(
                provider,
                UHP_BASES="codex",
                UHP_SANDBOX="local",
                UHP_MAX_CONCURRENT_TURNS=admitted,
                UHP_MAX_TURNS_PER_PRINCIPAL=admitted,
            )
            server = ServerProcess(scratch / "server", env)
            stack.callback(server.stop)  # registered first: stops a half-started server too
            if args.server_log:
                stack.callback(lambda: args.server_log.write_text(server.log()))
            server.start()
            assert server.proc is not None
            try:
                idle, loaded = asyncio.run(measure(server.url, args.tasks, args.probes, log))
            except BenchError:
                log("the server's errors:\n" + server_errors(server.log()))
                raise
            log("waiting for the cancelled turns' processes to be gone")
            wait_children_gone(server.proc.pid, timeout=60)
    except KeyboardInterrupt:
        log("interrupted; everything the bench started has been stopped")
        return 130
    except BenchError as exc:
        log(f"bench failed: {exc}")
        return 1
    print(report(idle, loaded, args.tasks))
    if args.smoke and loaded.streaming_at_cancel < args.tasks:
        # Not a target: a smoke run's two tasks always start, unless the bench's plan broke.
        log("bench failed: not every task was streaming when they were cancelled")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
