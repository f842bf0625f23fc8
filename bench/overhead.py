"""What does the server add on top of running a base's CLI directly?

Runs the same scripted tasks several ways, interleaved, in one go:

- direct: the pinned CLI driven by its harness base (`--base`), no server, no sandbox;
- for Codex also exec: `codex exec --json`, a second reference;
- server: a real `uhp-server serve` subprocess with only that base enabled,
  `POST /v1/responses` with `stream: true`.

All of them talk to the same in-process scripted provider. A CLI speaking a wire the provider
does not (Gemini CLI's Gemini API) reaches it in direct mode through the real model gateway,
in-process, as its base tests do: the translation the server also does is then on both sides.
Usage:

    python bench/overhead.py [--base B] [--tasks N] [--smoke]   # B: any registered base
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from harness_bases import events as ev
from harness_bases import registry
from harness_bases.acp import AcpBase
from harness_bases.base import SYSTEM_PATH, HarnessBase
from harness_bases.codex import install as codex_install
from harness_bases.codex.config import TOKEN_ENV, write_config
from uhp_server.engine.turns.phases import TurnPhase

# tests/ is not an installed package: the bench borrows the test suite's helpers from the repo.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _runs, _smoke
from bench._runs import BenchError
from tests.conftest import API_KEY, DEFAULT_MODELS, MODELS, PROVIDER_KEY, server_env, tools_dir
from tests.scripted_provider import RunningProvider, start_provider
from tests.support.direct_turn import direct_spec, run_direct_turn
from tests.support.gateway_server import RunningGateway
from tests.support.server import ServerProcess

TURN_TIMEOUT = 120.0
RATIO_TARGET = 1.10  # every base ...
RATIO_TARGETS = {"codex": 1.05, "claude-code": 1.05}  # ... but these two (issue 32)
# The wires the scripted provider speaks itself (Chat Completions, Responses, Messages).
PROVIDER_WIRES = ("chat", "responses", "anthropic")
CREATED_TARGET_MS = 20.0

# kind -> (prompt, the answer every mode must produce)
TASKS = {
    "text": ("SAY hello world", "hello world"),
    "tool": ("RUN echo hi\nSAY got {output}", "got hi"),
}


# -- direct: the CLI driven by its base, and other direct references -------------------------


@dataclass
class Direct:
    """Runs turns straight against the provider; every turn gets fresh home and workspace."""

    base: HarnessBase
    provider: RunningProvider
    tools: Path
    scratch: Path
    gateway: RunningGateway | None = None  # for a wire the provider does not speak
    _count: int = 0

    def folders(self) -> tuple[Path, Path]:
        self._count += 1
        home = self.scratch / f"direct-{self._count}" / "home"
        workspace = home.parent / "workspace"
        home.mkdir(parents=True)
        workspace.mkdir()
        return home, workspace

    def run_base(self, prompt: str) -> float:
        """Seconds from preparing the turn to the outcome the CLI reports (answer checked)."""
        home, workspace = self.folders()
        backend = self.base.backend
        gateway = self.gateway
        spec = direct_spec(
            prompt,
            model=DEFAULT_MODELS[backend],
            gateway_url=gateway.url if gateway else self.provider.url_for(backend),
            home=home,
            workspace=workspace,
            tools=self.tools,
        )
        if gateway is not None:
            spec = dataclasses.replace(spec, gateway_token=gateway.token)
        # The wind-down after the outcome (stdin closed, the CLI flushes its transcript and
        # exits) is left out of the measured time, as the server's is.
        turn = asyncio.run(run_direct_turn(self.base, spec, timeout=TURN_TIMEOUT))
        if not isinstance(turn.outcome, ev.TurnFinished) or turn.outcome_at is None:
            raise BenchError(
                f"direct turn did not finish: {turn.outcome}\n{turn.proc.stderr_tail()}"
            )
        _check_answer("direct", prompt, turn.text)
        return turn.outcome_at - turn.started


def run_codex_exec(direct: Direct, prompt: str) -> float:
    """Seconds from starting `codex exec --json` to its `turn.completed` line."""
    home, workspace = direct.folders()
    write_config(home / ".codex", DEFAULT_MODELS["openai"], direct.provider.base_url)
    env = {
        "PATH": f"{codex_install.helper_path_dir(str(direct.tools))}:{SYSTEM_PATH}",
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        TOKEN_ENV: PROVIDER_KEY,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    binary = codex_install.binary_path(str(direct.tools))
    argv = [binary, "exec", "--json", "--skip-git-repo-check", "-C", str(workspace), prompt]
    text, outcome = "", None
    started = time.perf_counter()
    with subprocess.Popen(
        argv,
        env=env,
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                event = json.loads(line)
                item = event.get("item") or {}
                if event["type"] == "item.completed" and item.get("type") == "agent_message":
                    text += item["text"]
                if event["type"] in ("turn.completed", "turn.failed"):
                    outcome = event["type"]
                    break
            elapsed = time.perf_counter() - started
            proc.wait(TURN_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
    if outcome != "turn.completed":
        raise BenchError(f"codex exec did not complete a turn (exit {proc.returncode})")
    _check_answer("exec", prompt, text)
    return elapsed


@dataclass(frozen=True)
class Subject:
    """What the bench compares the server with for one base."""

    base: HarnessBase
    direct: str  # the direct mode's name: the interface the base drives
    # Other ways to run the same CLI directly, for reference: mode name -> one timed run.
    references: dict[str, Callable[[Direct, str], float]] = field(default_factory=dict)

    @property
    def modes(self) -> tuple[str, ...]:
        return (self.direct, *self.references, "server")


# The interface each base drives, by name ("acp" for every ACP base, "direct" for any other),
# and the other ways to run its CLI directly that the bench also times.
DIRECT_MODES = {"codex": "app-server", "claude-code": "stream-json"}
REFERENCES: dict[str, dict[str, Callable[[Direct, str], float]]] = {
    "codex": {"exec": run_codex_exec}
}


def subject(name: str) -> Subject:
    base = registry()[name]
    default = "acp" if isinstance(base, AcpBase) else "direct"
    return Subject(base, DIRECT_MODES.get(name, default), REFERENCES.get(name, {}))


# -- through the server ------------------------------------------------------------------------


@dataclass
class ServerTiming:
    total: float  # request sent -> terminal event, seconds
    created: float  # request sent -> response.created, seconds


def server_task(
    client: httpx.Client, prompt: str, metadata: dict[str, str] | None = None
) -> ServerTiming:
    body: dict[str, object] = {"input": prompt}
    if metadata:
        body["metadata"] = metadata
    streamed = _runs.streamed_response(client, body, first_of=("response.created",))
    final, created = streamed.final, streamed.first.get("response.created")
    if final["status"] != "completed" or created is None:
        raise BenchError(f"server task ended {final['status']}: {final.get('error')}")
    text = _runs.output_text(final)
    _check_answer("server", prompt, text)
    return ServerTiming(streamed.total, created)


def wait_children_gone(pid: int, timeout: float = 15.0) -> None:
    """Wait until the server has no child processes: the previous task's sandbox has wound
    down (after the terminal event) and does not compete with the next measurement."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _has_children(pid):
        time.sleep(0.02)


def _has_children(pid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The fields after the command name (in parentheses, may contain spaces).
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                return True
    return False


# -- running and reporting ---------------------------------------------------------------------


def _check_answer(mode: str, prompt: str, text: str) -> None:
    expected = next(answer for p, answer in TASKS.values() if p == prompt)
    if text.strip() != expected:
        raise BenchError(f"{mode}: expected {expected!r} for {prompt!r}, got {text!r}")


@dataclass
class Results:
    seconds: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (kind, mode)
    created_ms: dict[str, list[float]] = field(default_factory=dict)  # kind
    # The server's turns, phase by phase (uhp_turn_phase_seconds): mean ms over the recorded
    # rounds, in the order a turn goes through them.
    phases_ms: dict[str, float] = field(default_factory=dict)

    def add(self, kind: str, mode: str, seconds: float) -> None:
        self.seconds.setdefault((kind, mode), []).append(seconds)

    def median(self, kind: str, mode: str) -> float:
        return statistics.median(self.seconds[(kind, mode)])


def p90(values: list[float]) -> float:
    """Nearest-rank 90th percentile (with fewer than 10 samples: the maximum)."""
    ordered = sorted(values)
    return ordered[math.ceil(0.9 * len(ordered)) - 1]


def run_bench(
    subject: Subject,
    tasks: int,
    scratch: Path,
    log: Callable[[str], None],
    warm_up: bool = True,
) -> Results:
    base, tools = subject.base, tools_dir()
    if base.installed_version(tools) != base.cli_version:
        log(f"installing {base.label} {base.cli_version} under {tools} ...")
        base.install(tools)
    results = Results()
    with contextlib.ExitStack() as stack:
        provider = start_provider(PROVIDER_KEY, MODELS)
        stack.callback(provider.stop)
        server = ServerProcess(scratch / "server", server_env(provider, UHP_BASES=base.name))
        stack.callback(server.stop)  # registered first: stops a half-started server too
        server.start()
        assert server.proc is not None
        client = stack.enter_context(
            httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Bearer {API_KEY}"},
                timeout=TURN_TIMEOUT,
            )
        )
        gateway = None
        if base.wire not in PROVIDER_WIRES:
            gateway = RunningGateway(provider.base_url, PROVIDER_KEY, DEFAULT_MODELS[base.backend])
            stack.callback(gateway.stop)
        direct = Direct(base, provider, tools, scratch, gateway)

        def once(kind: str, mode: str, record: bool) -> None:
            prompt = TASKS[kind][0]
            provider.reset()  # the provider records every request; keep it small
            if mode == subject.direct:
                seconds = direct.run_base(prompt)
            elif mode in subject.references:
                seconds = subject.references[mode](direct, prompt)
            else:
                timing = server_task(client, prompt)
                wait_children_gone(server.pid)
                seconds = timing.total
                if record:
                    results.created_ms.setdefault(kind, []).append(timing.created * 1000)
            if record:
                results.add(kind, mode, seconds)

        if warm_up:
            log("warm-up: every mode on every kind (not recorded)")
            for kind in TASKS:
                for mode in subject.modes:
                    once(kind, mode, record=False)
        before = phase_totals(client)
        for i in range(tasks):
            log(f"round {i + 1}/{tasks}")
            # Interleaved, and the order flips each round so neither side always goes first.
            order = subject.modes if i % 2 == 0 else subject.modes[::-1]
            for kind in TASKS:
                for mode in order:
                    once(kind, mode, record=True)
        results.phases_ms = phase_means_ms(before, phase_totals(client))
    return results


def phase_totals(client: httpx.Client) -> dict[str, tuple[float, float]]:
    """(sum of seconds, count) of each phase of the server's turns so far, from /metrics."""
    totals: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        if family.name != "uhp_turn_phase_seconds":
            continue
        for sample in family.samples:
            kind = sample.name.removeprefix("uhp_turn_phase_seconds_")
            if kind in ("sum", "count"):
                slot = totals.setdefault(sample.labels["phase"], [0.0, 0.0])
                slot[0 if kind == "sum" else 1] += sample.value
    return {phase: (total[0], total[1]) for phase, total in totals.items()}


def phase_means_ms(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float]:
    means = {}
    for phase in TurnPhase:
        seconds, count = after.get(phase, (0.0, 0.0))
        seconds_before, count_before = before.get(phase, (0.0, 0.0))
        if count > count_before:
            means[phase.value] = 1000 * (seconds - seconds_before) / (count - count_before)
    return means


def report(subject: Subject, results: Results, tasks: int) -> str:
    direct = subject.direct
    columns = [(mode, f"{mode} s") for mode in subject.modes]
    widths = {mode: max(len(title), 8) for mode, title in columns}
    ratio = f"server/{direct}"
    ratio_width = max(len(ratio), 14)
    header = " ".join(
        [
            f"{'kind':<6}",
            *(f"{title:>{widths[mode]}}" for mode, title in columns),
            f"{ratio:>{ratio_width}}",
            f"{'created med ms':>14}",
            f"{'created p90 ms':>14}",
        ]
    )
    base = subject.base
    lines = [
        f"UHP server overhead over {base.label} {base.cli_version}: {tasks} task(s) per kind, "
        "medians (after one warm-up round)",
        "",
        header,
        "-" * len(header),
    ]
    for kind in TASKS:
        medians = {mode: results.median(kind, mode) for mode in subject.modes}
        created = results.created_ms[kind]
        cells = [f"{medians[mode]:>{widths[mode]}.3f}" for mode in subject.modes]
        lines.append(
            " ".join(
                [
                    f"{kind:<6}",
                    *cells,
                    f"{medians['server'] / medians[direct]:>{ratio_width}.3f}",
                    f"{statistics.median(created):>14.1f}",
                    f"{p90(created):>14.1f}",
                ]
            )
        )
    server_sum = sum(results.median(kind, "server") for kind in TASKS)
    direct_sum = sum(results.median(kind, direct) for kind in TASKS)
    overall = server_sum / direct_sum
    target = RATIO_TARGETS.get(base.name, RATIO_TARGET)
    created = [ms for values in results.created_ms.values() for ms in values]
    created_median, created_p90 = statistics.median(created), p90(created)

    def verdict(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    lines += [
        "",
        f"overall server/direct {direct} (sum of per-kind medians): "
        f"{overall:.3f}  target <= {target:.2f}: {verdict(overall <= target)}",
        f"response.created over all server tasks: median {created_median:.1f} ms, "
        f"p90 {created_p90:.1f} ms  target <= {CREATED_TARGET_MS:.0f} ms: "
        f"median {verdict(created_median <= CREATED_TARGET_MS)}, "
        f"p90 {verdict(created_p90 <= CREATED_TARGET_MS)}",
        "",
        "times are to the terminal event (server) / the CLI's outcome (direct), client side.",
        "",
        "the server's turn, phase by phase (mean ms over every recorded server task, from "
        "uhp_turn_phase_seconds; recorded comes before the client sees the terminal event, "
        "wound_down after):",
        *(f"  {phase:<12} {ms:>9.1f}" for phase, ms in results.phases_ms.items()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", choices=sorted(registry()), default="codex", help="the CLI")
    parser.add_argument("--tasks", type=int, default=5, help="tasks per kind and mode")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(argv), tasks=1)
    if args.tasks < 1:
        parser.error("--tasks must be at least 1")
    measured = subject(args.base)

    def run() -> Results:
        try:
            with _runs.scratch_folder() as scratch:
                return run_bench(measured, args.tasks, scratch, _runs.log, not args.smoke)
        except TimeoutError:
            raise BenchError(f"a turn took longer than {TURN_TIMEOUT:.0f} s") from None

    results = _runs.finished(run)
    if isinstance(results, int):
        return results
    print(report(measured, results, args.tasks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
