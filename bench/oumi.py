"""20 Oumi rows submitted at once to a server that runs 4 turns at a time.

The platform's side, as the Oumi harness protocol drives it: every row is submitted at the
same moment (one `submit` each), then polled with `get_status` until terminal, then its
output collected. With UHP_MAX_CONCURRENT_TURNS=4 most rows wait `queued`; none may fail. The
answer time of every request is recorded and printed per route (p50/p99), against the
protocol's 30 s rule.

It starts the scripted provider (Chat Completions only: the platform's model connection) and
a real `uhp-server serve` (bubblewrap sandbox, the real CLI of UHP_TEST_BASE, Codex by
default). Usage:

    python bench/oumi.py [--rows N] [--concurrent N] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, TEST_BASE, installed_tools, server_env
from tests.scripted_provider import start_provider
from tests.support.server import ServerProcess

PLATFORM_KEY = "sk-bench-platform-key"
PLATFORM_MODEL = "bench-model"
ANSWER_RULE_MS = 30_000.0
ROW_PROMPT = "RUN echo row-{n}\nSAY row {n} done: {{output}}"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def timed(times: dict[str, list[float]], route: str, call: Any) -> httpx.Response:
    started = time.perf_counter()
    answer = await call
    times[route].append((time.perf_counter() - started) * 1000)
    return answer


async def run_row(
    http: httpx.AsyncClient,
    endpoint: str,
    n: int,
    connection: dict[str, Any],
    times: dict[str, list[float]],
    seen: dict[str, set[str]],
) -> str:
    invocation = uuid.uuid4().hex
    body = {
        "protocol_version": "1",
        "session_id": f"ses_{invocation}",
        "invocation_id": invocation,
        "session_action": "start",
        "input_messages": [{"role": "user", "content": ROW_PROMPT.format(n=n)}],
        "model_connection": connection,
    }
    submitted = await timed(times, "submit", http.post(f"{endpoint}/submit", json=body))
    if submitted.status_code != 202:
        return f"submit answered {submitted.status_code}"
    params = {"invocation_id": invocation}
    while True:
        answer = await timed(times, "get_status", http.get(f"{endpoint}/get_status", params=params))
        status = answer.json()["status"]
        seen[status].add(invocation)
        if status in ("completed", "failed", "cancelled"):
            break
        await asyncio.sleep(0.5)
    if status != "completed":
        return status
    output = await timed(
        times, "collect_output", http.get(f"{endpoint}/collect_output", params=params)
    )
    last = output.json()["messages"][-1]["content"]
    return "completed" if f"row {n} done: row-{n}" in last else f"wrong output: {last[:80]}"


async def bench(rows: int, concurrent: int) -> int:
    installed_tools(TEST_BASE)
    with (
        start_provider(PROVIDER_KEY, MODELS) as provider,
        start_provider(PLATFORM_KEY, [PLATFORM_MODEL], chat_only=True) as platform,
        tempfile.TemporaryDirectory() as tmp,
    ):
        env = server_env(
            provider,
            UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS="true",
            UHP_MAX_CONCURRENT_TURNS=str(concurrent),
        )
        server = ServerProcess(Path(tmp) / "data", env).start()
        try:
            headers = {"Authorization": f"Bearer {API_KEY}"}
            async with httpx.AsyncClient(headers=headers, timeout=60) as http:
                listing = (await http.get(f"{server.url}/v1/harnesses")).json()
                harness = next(h for h in listing["harnesses"] if h["base"] == TEST_BASE)
                endpoint = f"{server.url}/oumi/harnesses/{harness['id']}"
                connection = {
                    "base_url": platform.base_url,
                    "model": PLATFORM_MODEL,
                    "api_key": PLATFORM_KEY,
                }
                times: dict[str, list[float]] = defaultdict(list)
                seen: dict[str, set[str]] = defaultdict(set)
                started = time.perf_counter()
                outcomes = await asyncio.gather(
                    *(run_row(http, endpoint, n, connection, times, seen) for n in range(rows))
                )
                wall = time.perf_counter() - started
        finally:
            server.stop()
    report(rows, concurrent, outcomes, times, seen, wall)
    return 0 if all(o == "completed" for o in outcomes) else 1


def report(
    rows: int,
    concurrent: int,
    outcomes: list[str],
    times: dict[str, list[float]],
    seen: dict[str, set[str]],
    wall: float,
) -> None:
    completed = sum(o == "completed" for o in outcomes)
    print(f"base {TEST_BASE}: {rows} rows at once, UHP_MAX_CONCURRENT_TURNS={concurrent}")
    print(f"  completed {completed}/{rows}, failed {rows - completed}, wall {wall:.1f} s")
    print(f"  rows seen queued: {len(seen['queued'])}, seen running: {len(seen['running'])}")
    for outcome in sorted(set(outcomes) - {"completed"}):
        print(f"  NOT completed: {outcome} x{outcomes.count(outcome)}")
    everything: list[float] = []
    for route in ("submit", "get_status", "collect_output"):
        values = times[route]
        everything += values
        print(
            f"  {route:<15} n={len(values):<4} p50 {percentile(values, 50):8.1f} ms"
            f"   p99 {percentile(values, 99):8.1f} ms   max {max(values):8.1f} ms"
        )
    p99 = percentile(everything, 99)
    print(f"  every request   p99 {p99:.1f} ms = {p99 / ANSWER_RULE_MS:.4f} of the 30 s rule")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=4)
    _smoke.add_flag(parser)
    # Two rows on one turn: the second still waits in the queue.
    args = _smoke.shrink(parser.parse_args(), rows=2, concurrent=1)
    sys.exit(asyncio.run(bench(args.rows, args.concurrent)))


if __name__ == "__main__":
    main()
