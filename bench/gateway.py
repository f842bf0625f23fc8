"""What does translating a CLI's wire to Chat Completions cost a whole task?

One server per base, two providers behind it, interleaved in one run:

- native: the scripted provider serving the base's own wire (Codex: Responses, Claude Code:
  Anthropic Messages, Hermes: Chat), as `OPENAI_*` / `ANTHROPIC_*`;
- translated: a second scripted provider serving Chat Completions only (no models route),
  from a providers file as provider `chat`; the task names `chat/<model>`, so the gateway
  translates every model call (Hermes' Chat passes through: its ratio is the control).

The same scripted tasks as bench/overhead.py run both ways through `POST /v1/responses`
(`stream: true`); the bench prints the medians side by side, translated ÷ native per kind and
overall (target ≤ 1.05), then the translators' cost per streamed chunk from
bench/gateway_chunks.py (target p99 < 1 ms). Usage:

    python bench/gateway.py [--base B ...] [--tasks N] [--chunk-rounds N] [--smoke]
    # default: codex claude-code, N=5
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from harness_bases import registry

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _smoke
from bench._runs import sse_events
from bench.gateway_chunks import TARGET_P99_SECONDS, chat_stream_chunks, chunk_costs, percentile
from bench.overhead import TASKS, TURN_TIMEOUT, BenchError, wait_children_gone
from tests.conftest import API_KEY, DEFAULT_MODELS, MODELS, PROVIDER_KEY, server_env, tools_dir
from tests.scripted_provider import RunningProvider, start_provider
from tests.support.server import ServerProcess

RATIO_TARGET = 1.05
MODES = ("native", "translated")
CHAT_KEY_ENV = "BENCH_CHAT_PROVIDER_KEY"


def task_seconds(client: httpx.Client, prompt: str, model: str) -> float:
    """Seconds from the request to the terminal event of one streamed task (answer checked)."""
    expected = next(answer for p, answer in TASKS.values() if p == prompt)
    started = time.perf_counter()
    with client.stream(
        "POST", "/v1/responses", json={"input": prompt, "model": model, "stream": True}
    ) as response:
        if response.status_code != 200:
            raise BenchError(f"server answered {response.status_code}: {response.read()!r}")
        for event in sse_events(response.iter_lines()):
            if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
                elapsed = time.perf_counter() - started
                final = event["response"]
                break
        else:
            raise BenchError("the stream ended without a terminal event")
    if final["status"] != "completed" or final["model"] != model:
        raise BenchError(f"{model}: task ended {final['status']}: {final.get('error')}")
    text = "".join(
        part.get("text", "")
        for item in final["output"]
        if item["type"] == "message"
        for part in item["content"]
    )
    if text.strip() != expected:
        raise BenchError(f"{model}: expected {expected!r}, got {text!r}")
    return elapsed


def start_server(
    base: str, native: RunningProvider, chat: RunningProvider, scratch: Path
) -> ServerProcess:
    providers_file = scratch / "providers.yaml"
    providers_file.write_text(
        "providers:\n  chat:\n    api: chat\n"
        f"    base_url: {chat.base_url}\n    api_key_env: {CHAT_KEY_ENV}\n"
        f"    models: [{', '.join(MODELS)}]\n"
    )
    env = server_env(
        native,
        UHP_BASES=base,
        UHP_PROVIDERS_FILE=str(providers_file),
        **{CHAT_KEY_ENV: PROVIDER_KEY},
    )
    return ServerProcess(scratch / "server", env).start()


def run_base(
    base_name: str, tasks: int, scratch: Path, log: Callable[[str], None], warm_up: bool = True
) -> dict[tuple[str, str], list[float]]:
    base, tools = registry()[base_name], tools_dir()
    if base.installed_version(tools) != base.cli_version:
        log(f"installing {base.label} {base.cli_version} under {tools} ...")
        base.install(tools)
    model = DEFAULT_MODELS[base.backend]
    models = {"native": model, "translated": f"chat/{model}"}
    seconds: dict[tuple[str, str], list[float]] = {}
    with contextlib.ExitStack() as stack:
        native = start_provider(PROVIDER_KEY, MODELS)
        stack.callback(native.stop)
        chat = start_provider(PROVIDER_KEY, MODELS, chat_only=True)
        stack.callback(chat.stop)
        server = start_server(base_name, native, chat, scratch)
        stack.callback(server.stop)
        assert server.proc is not None
        client = stack.enter_context(
            httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Bearer {API_KEY}"},
                timeout=TURN_TIMEOUT,
            )
        )

        def once(kind: str, mode: str) -> float:
            native.reset()
            chat.reset()
            elapsed = task_seconds(client, TASKS[kind][0], models[mode])
            reached = chat if mode == "translated" else native
            if not any(r["path"].startswith("/v1/") for r in reached.requests()):
                raise BenchError(f"{mode}: the model calls did not reach the {mode} provider")
            wait_children_gone(server.pid)
            return elapsed

        if warm_up:
            log(f"{base.label}: warm-up, every mode on every kind (not recorded)")
            for kind in TASKS:
                for mode in MODES:
                    once(kind, mode)
        for i in range(tasks):
            log(f"{base.label}: round {i + 1}/{tasks}")
            order = MODES if i % 2 == 0 else MODES[::-1]  # neither side always goes first
            for kind in TASKS:
                for mode in order:
                    seconds.setdefault((kind, mode), []).append(once(kind, mode))
    return seconds


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def report_tasks(base_name: str, seconds: dict[tuple[str, str], list[float]], tasks: int) -> str:
    base = registry()[base_name]
    lines = [
        f"{base.label} {base.cli_version} ({base.wire} wire): {tasks} task(s) per kind and mode, "
        "medians after one warm-up round",
        f"{'kind':<6} {'native s':>9} {'translated s':>13} {'translated/native':>18}",
    ]
    for kind in TASKS:
        native = statistics.median(seconds[(kind, "native")])
        translated = statistics.median(seconds[(kind, "translated")])
        lines.append(f"{kind:<6} {native:>9.3f} {translated:>13.3f} {translated / native:>18.3f}")
    native_sum = sum(statistics.median(seconds[(k, "native")]) for k in TASKS)
    translated_sum = sum(statistics.median(seconds[(k, "translated")]) for k in TASKS)
    overall = translated_sum / native_sum
    lines.append(
        f"overall translated/native (sum of per-kind medians): {overall:.3f}  "
        f"target <= {RATIO_TARGET:.2f}: {verdict(overall <= RATIO_TARGET)}"
    )
    return "\n".join(lines)


def report_chunks(rounds: int) -> str:
    chunks = chat_stream_chunks()
    lines = [f"translation per streamed chunk: {len(chunks)} chunks a stream, {rounds} streams"]
    for wire in ("responses", "anthropic"):
        chunk_costs(wire, chunks)  # warm-up
        costs = [c for _ in range(rounds) for c in chunk_costs(wire, chunks)]
        p50, p99 = statistics.median(costs), percentile(costs, 0.99)
        lines.append(
            f"{wire:>9} over chat: p50 {p50 * 1e6:6.1f} µs  p99 {p99 * 1e6:6.1f} µs  "
            f"target p99 < {TARGET_P99_SECONDS * 1e6:.0f} µs: {verdict(p99 < TARGET_P99_SECONDS)}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base",
        nargs="+",
        choices=sorted(registry()),
        default=["codex", "claude-code"],
        help="the bases to measure (Hermes: no translation, a control)",
    )
    parser.add_argument("--tasks", type=int, default=5, help="tasks per kind and mode")
    parser.add_argument("--chunk-rounds", type=int, default=5, help="streams per wire")
    _smoke.add_flag(parser)
    # One base: the bench's path is the same for each (the chunk costs still take both wires).
    args = _smoke.shrink(parser.parse_args(argv), base=["codex"], tasks=1, chunk_rounds=1)
    if args.tasks < 1:
        parser.error("--tasks must be at least 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    # Not under /tmp, as in bench/overhead.py: the server's sandbox homes are never there.
    cache = Path.home() / ".cache" / "uhp-server"
    cache.mkdir(parents=True, exist_ok=True)
    sections = []
    try:
        for base_name in args.base:
            with tempfile.TemporaryDirectory(prefix="bench-gw-", dir=cache) as scratch:
                seconds = run_base(base_name, args.tasks, Path(scratch), log, not args.smoke)
            sections.append(report_tasks(base_name, seconds, args.tasks))
    except KeyboardInterrupt:
        log("interrupted; everything the bench started has been stopped")
        return 130
    except (BenchError, TimeoutError) as exc:
        log(f"bench failed: {exc or 'a turn took too long'}")
        return 1
    sections.append(report_chunks(args.chunk_rounds))
    print("\n\n".join(sections))
    print("\ntimes are to the terminal event, client side; both providers are in-process.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
