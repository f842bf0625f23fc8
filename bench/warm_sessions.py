"""A continued session's time to first text delta: cold, and kept warm (issue 32, point 2).

A real `uhp-server serve` subprocess (local sandbox, only `--base` enabled) and the in-process
scripted provider. Two harnesses of that base: one as every harness is by default, one with
`uhpserver_keepWarmSeconds`. Each round opens a session on each (its first turn, not
measured), then continues it with `stream: true` and measures, from the request sent, the
first `response.output_text.delta` and the terminal event. The two modes alternate which
goes first, round by round, so a machine's drift weighs on both alike; before a cold
continued turn the first turn's process is gone, as it is for a client that continues a
session later.

Usage:

    python bench/warm_sessions.py [--base B] [--rounds N] [--smoke]   # B: a base that keeps warm
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from harness_bases import registry

# tests/ is not an installed package: the bench borrows the test suite's helpers from the repo.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _runs, _smoke
from bench._runs import BenchError
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, server_env, tools_dir
from tests.scripted_provider import start_provider
from tests.support.sandbox_processes import sandbox_processes
from tests.support.server import ServerProcess

TURN_TIMEOUT = 120.0
KEEP_WARM_SECONDS = 600
MODES = ("cold", "warm")
FIRST, CONTINUED = "SAY first turn", "SAY continued turn"


@dataclass
class Timing:
    first_delta: float  # request sent -> first output_text delta, seconds
    total: float  # request sent -> terminal event, seconds


@dataclass
class Results:
    timings: dict[str, list[Timing]] = field(default_factory=lambda: {m: [] for m in MODES})

    def median(self, mode: str, what: str) -> float:
        return statistics.median(getattr(t, what) for t in self.timings[mode])


def streamed_turn(client: httpx.Client, body: dict[str, object]) -> tuple[Timing, dict]:
    """One streamed turn: its timing and its final response."""
    delta = "response.output_text.delta"
    streamed = _runs.streamed_response(client, body, first_of=(delta,))
    final, first_delta = streamed.final, streamed.first.get(delta)
    if final["status"] != "completed" or first_delta is None:
        raise BenchError(f"a turn ended {final['status']}: {final.get('error')}")
    return Timing(first_delta, streamed.total), final


def session_processes(session_id: str) -> list[int]:
    """Host pids of the session's local sandbox (bwrap down), found by what it mounts."""
    return [int(line.split()[0]) for line in sandbox_processes(session_id)]


def wait_gone(session_id: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while session_processes(session_id) and time.monotonic() < deadline:
        time.sleep(0.02)
    if session_processes(session_id):
        raise BenchError(f"session {session_id}'s process is still running")


def one_round(client: httpx.Client, harnesses: dict[str, str], mode: str) -> Timing:
    """Open a session on the mode's harness, continue it, measure the continuation."""
    metadata = {"harness_id": harnesses[mode]}
    _, first = streamed_turn(client, {"input": FIRST, "metadata": metadata})
    session = first["metadata"]["session_id"]
    try:
        if mode == "cold":
            wait_gone(session)  # the first turn's process is gone: a cold start follows
        elif not session_processes(session):
            raise BenchError("the warm harness's first turn left no process running")
        warm_pids = set(session_processes(session))
        timing, final = streamed_turn(
            client, {"input": CONTINUED, "metadata": metadata, "previous_response_id": first["id"]}
        )
        if _runs.output_text(final).strip() != "continued turn":
            raise BenchError(f"{mode}: unexpected answer {_runs.output_text(final)!r}")
        if mode == "warm" and not warm_pids <= set(session_processes(session)):
            raise BenchError("the warm continued turn did not run in the kept process")
    finally:
        client.delete(f"/v1/sessions/{session}")
    wait_gone(session)
    return timing


def run_bench(base_name: str, rounds: int, scratch: Path, log: Callable[[str], None]) -> Results:
    base, tools = registry()[base_name], tools_dir()
    if base.installed_version(tools) != base.cli_version:
        log(f"installing {base.label} {base.cli_version} under {tools} ...")
        base.install(tools)
    results = Results()
    with contextlib.ExitStack() as stack:
        provider = start_provider(PROVIDER_KEY, MODELS)
        stack.callback(provider.stop)
        env = server_env(provider, UHP_BASES=base.name, UHP_SANDBOX="local")
        server = ServerProcess(scratch / "server", env)
        stack.callback(server.stop)  # registered first: stops a half-started server too
        server.start()
        client = stack.enter_context(
            httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Bearer {API_KEY}"},
                timeout=TURN_TIMEOUT,
            )
        )
        harnesses = {}
        for mode in MODES:
            body: dict[str, object] = {"name": f"bench {mode}", "base": base.name}
            if mode == "warm":
                body["uhpserver_keepWarmSeconds"] = KEEP_WARM_SECONDS
            made = client.post("/v1/harnesses", json=body)
            if made.status_code != 200:
                raise BenchError(f"harness refused: {made.text}")
            harnesses[mode] = made.json()["id"]
        for mode in MODES:  # a round of each, unrecorded: the CLI's first start is slower
            one_round(client, harnesses, mode)
        for number in range(rounds):
            order = MODES if number % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                provider.reset()  # the provider records every request; keep it small
                results.timings[mode].append(one_round(client, harnesses, mode))
            log(f"round {number + 1}/{rounds} done")
    return results


def report(base_name: str, results: Results, rounds: int) -> str:
    cold, warm = (results.median(m, "first_delta") * 1000 for m in MODES)
    cold_total, warm_total = (results.median(m, "total") * 1000 for m in MODES)
    load = os.getloadavg()[0]
    lines = [
        f"{base_name}: a continued session's turn, {rounds} rounds each, interleaved "
        f"(median ms; load {load:.2f})",
        f"{'':<22}{'cold':>10}{'warm':>10}{'warm/cold':>11}",
        f"{'first text delta':<22}{cold:>10.0f}{warm:>10.0f}{warm / cold:>11.2f}",
        f"{'whole turn':<22}{cold_total:>10.0f}{warm_total:>10.0f}{warm_total / cold_total:>11.2f}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    warm_bases = sorted(name for name, base in registry().items() if base.keeps_warm)
    parser.add_argument("--base", choices=warm_bases, default="codex", help="the CLI")
    parser.add_argument("--rounds", type=int, default=7, help="continued turns per mode")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(argv), rounds=1)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    def run() -> Results:
        with _runs.scratch_folder() as scratch:
            return run_bench(args.base, args.rounds, scratch, _runs.log)

    results = _runs.finished(run)
    if isinstance(results, int):
        return results
    print(report(args.base, results, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
