"""What does the server add on top of running Hermes Agent directly?

Runs the same scripted tasks two ways, interleaved:

- direct: Hermes' ACP server (through the base's launcher) driven by HermesBase, no server, no
  sandbox, straight at the scripted provider;
- server: a real `uhp-server serve` subprocess with only the hermes base enabled
  (bubblewrap sandbox, OpenAI model gateway), `POST /v1/responses` with `stream: true`.

Usage:

    python bench/hermes_overhead.py [--tasks N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from harness_bases import events as ev
from harness_bases.base import SandboxPaths, TurnSpec
from harness_bases.hermes import HermesBase

# tests/ and bench/ are not installed packages: borrow their helpers from the repo.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.overhead import (
    CREATED_TARGET_MS,
    RATIO_TARGET,
    TASKS,
    TURN_TIMEOUT,
    BenchError,
    LocalProcess,
    _check_answer,
    p90,
    server_task,
    wait_children_gone,
)
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, server_env, tools_dir
from tests.scripted_provider import RunningProvider, start_provider
from tests.support.server import ServerProcess

MODEL = "gpt-test"
MODES = ("direct", "server")


async def _direct(base: HermesBase, provider: RunningProvider, folder: Path, prompt: str):
    home, workspace = folder / "home", folder / "workspace"
    home.mkdir(parents=True)
    workspace.mkdir()
    tools = tools_dir()
    spec = TurnSpec(
        prompt=prompt,
        model=MODEL,
        gateway_url=provider.base_url,
        gateway_token=PROVIDER_KEY,
        host_workspace=workspace,
        host_home=home,
        host_tools=tools,
        paths=SandboxPaths(str(workspace), str(home), str(tools)),
    )
    started = time.perf_counter()
    proc = await LocalProcess.start(base.prepare(spec))
    agen = base.drive(proc, spec)
    text, outcome = "", None
    try:
        async with asyncio.timeout(TURN_TIMEOUT):
            async for event in agen:
                if isinstance(event, ev.TextDone):
                    text += event.text
                if isinstance(event, ev.TurnFinished | ev.TurnFailed):
                    outcome = event
                    break
        elapsed = time.perf_counter() - started
        async with asyncio.timeout(10):  # wind down outside the measured time
            await proc.close_stdin()
            async for _ in agen:
                pass
            await proc.wait()
    finally:
        await agen.aclose()
        await proc.kill()
    if not isinstance(outcome, ev.TurnFinished):
        raise BenchError(f"direct turn did not finish: {outcome}\n{proc.stderr_tail()}")
    _check_answer("direct", prompt, text)
    return elapsed


def run(tasks: int, scratch: Path) -> tuple[dict[tuple[str, str], list[float]], list[float]]:
    base = HermesBase()
    if base.installed_version(tools_dir()) != base.cli_version:
        print(f"installing Hermes Agent {base.cli_version} ...", flush=True)
        base.install(tools_dir())
    seconds: dict[tuple[str, str], list[float]] = {}
    created_ms: list[float] = []
    with contextlib.ExitStack() as stack:
        provider = start_provider(PROVIDER_KEY, MODELS)
        stack.callback(provider.stop)
        server = ServerProcess(scratch / "server", server_env(provider, UHP_BASES=base.name))
        stack.callback(server.stop)
        server.start()
        assert server.proc is not None
        client = stack.enter_context(
            httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Bearer {API_KEY}"},
                timeout=TURN_TIMEOUT,
            )
        )
        count = 0

        def once(kind: str, mode: str, record: bool) -> None:
            nonlocal count
            prompt = TASKS[kind][0]
            provider.reset()
            if mode == "direct":
                count += 1
                took = asyncio.run(_direct(base, provider, scratch / f"direct-{count}", prompt))
            else:
                timing = server_task(client, prompt)
                wait_children_gone(server.proc.pid)
                took = timing.total
                if record:
                    created_ms.append(timing.created * 1000)
            if record:
                seconds.setdefault((kind, mode), []).append(took)

        print("warm-up: every mode on every kind (not recorded)", flush=True)
        for kind in TASKS:
            for mode in MODES:
                once(kind, mode, record=False)
        for i in range(tasks):
            print(f"round {i + 1}/{tasks}", flush=True)
            order = MODES if i % 2 == 0 else MODES[::-1]
            for kind in TASKS:
                for mode in order:
                    once(kind, mode, record=True)
    return seconds, created_ms


def report(seconds: dict[tuple[str, str], list[float]], created_ms: list[float]) -> str:
    lines = [f"{'kind':<6} {'direct s':>9} {'server s':>9} {'server/direct':>14}"]
    for kind in TASKS:
        direct = statistics.median(seconds[(kind, "direct")])
        server = statistics.median(seconds[(kind, "server")])
        lines.append(f"{kind:<6} {direct:>9.3f} {server:>9.3f} {server / direct:>14.3f}")
    ratio = sum(statistics.median(seconds[(k, "server")]) for k in TASKS) / sum(
        statistics.median(seconds[(k, "direct")]) for k in TASKS
    )
    created_median, created_p90 = statistics.median(created_ms), p90(created_ms)
    ratio_ok = "MET" if ratio <= RATIO_TARGET else "NOT MET"
    created_ok = "MET" if created_p90 <= CREATED_TARGET_MS else "NOT MET"
    lines += [
        "",
        f"server/direct (sum of medians): {ratio:.3f} (target <= {RATIO_TARGET}): {ratio_ok}",
        f"time to response.created: median {created_median:.1f} ms, p90 {created_p90:.1f} ms "
        f"(target p90 <= {CREATED_TARGET_MS:.0f} ms): {created_ok}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5, help="tasks per kind and mode")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="uhp-bench-hermes-") as scratch:
        seconds, created_ms = run(args.tasks, Path(scratch))
    print(f"\nHermes overhead: {args.tasks} task(s) per kind, medians after a warm-up\n")
    print(report(seconds, created_ms))


if __name__ == "__main__":
    main()
