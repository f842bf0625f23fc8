"""How long until the first answer text: the Chat Completions door versus UHP streaming.

Runs the same scripted tasks on a real `uhp-server serve` (one base, the local sandbox, the
in-process scripted provider), interleaved, two ways:

- uhp: `POST /v1/responses` with `stream: true`, timed to the first
  `response.output_text.delta`;
- door: `POST /openai/v1/chat/completions` with `stream: true`, timed to the first
  `chat.completion.chunk` whose delta has content.

Both run on the same harness and are read as raw SSE with httpx, so the only difference is
the door itself. Prints the medians per kind and the median door/uhp ratio of back-to-back
pairs, per kind and overall (target ≤ 1.02). Usage:

    python bench/chat_door.py [--base B] [--tasks N] [--smoke]   # codex, 10 a kind and way
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, installed_tools, server_env
from tests.scripted_provider import start_provider
from tests.support.server import ServerProcess

RATIO_TARGET = 1.02
TASKS = {
    "text": "SAY hello world from the bench",
    "tool": "RUN echo hi\nSAY got {output}",
}
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def first_delta(
    http: httpx.Client, path: str, body: dict, is_text: Callable[[dict], bool]
) -> float:
    """Seconds from sending the request to the first event `is_text` accepts; the stream is
    then read to its end, so the next task finds the session and the machine idle."""
    started = time.perf_counter()
    seen: float | None = None
    with http.stream("POST", path, json=body, headers=AUTH) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            data = json.loads(line[6:])
            failure = data.get("error") or (data.get("response") or {}).get("error")
            if failure:
                raise RuntimeError(f"{path}: the task failed: {failure.get('message')}")
            if seen is None and is_text(data):
                seen = time.perf_counter() - started
    if seen is None:
        raise RuntimeError(f"{path}: the stream carried no answer text")
    return seen


def retried(way: Callable[[str], float]) -> Callable[[str], float]:
    """A run whose task failed is retried once, and said so: it measured nothing. (On a
    machine where other servers start, a turn can fail to start: local sandbox cgroups.)"""

    def run_once_more_on_failure(prompt: str) -> float:
        try:
            return way(prompt)
        except RuntimeError as failure:
            print(f"retried: {failure}", flush=True)
            return way(prompt)

    return run_once_more_on_failure


def uhp_text(event: dict) -> bool:
    return event.get("type") == "response.output_text.delta" and bool(event.get("delta"))


def door_text(chunk: dict) -> bool:
    return any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="codex")
    parser.add_argument("--tasks", type=int, default=10)
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), tasks=1)
    installed_tools(args.base)
    provider = start_provider(PROVIDER_KEY, MODELS)
    with tempfile.TemporaryDirectory(prefix="chat-door-bench-") as scratch:
        env = server_env(provider, UHP_BASES=args.base)
        server = ServerProcess(Path(scratch), env).start()
        try:
            run(server.url, args.tasks, warm_up=not args.smoke)
        finally:
            server.stop()
            provider.stop()


def run(url: str, tasks: int, warm_up: bool = True) -> None:
    with httpx.Client(base_url=url, timeout=120) as http:
        model = http.get("/openai/v1/models", headers=AUTH).json()["data"][0]["id"]
        harness_id = model.rsplit("--", 1)[1]

        def uhp(prompt: str) -> float:
            body = {"input": prompt, "stream": True, "metadata": {"harness_id": harness_id}}
            return first_delta(http, "/v1/responses", body, uhp_text)

        def door(prompt: str) -> float:
            messages = [{"role": "user", "content": prompt}]
            body = {"model": model, "messages": messages, "stream": True}
            return first_delta(http, "/openai/v1/chat/completions", body, door_text)

        ways = {"uhp": retried(uhp), "door": retried(door)}
        for prompt in TASKS.values() if warm_up else ():  # the first turns pay for cold caches
            for way in ways.values():
                way(prompt)
        times: dict[tuple[str, str], list[float]] = {}
        for round_ in range(tasks):
            for kind, prompt in TASKS.items():
                # Alternate which way goes first, so neither always follows the other.
                order = list(ways.items()) if round_ % 2 == 0 else list(ways.items())[::-1]
                for name, way in order:
                    times.setdefault((kind, name), []).append(way(prompt))
    report(times, tasks)


def report(times: dict[tuple[str, str], list[float]], tasks: int) -> None:
    """Medians per kind, and the median of the paired ratios (each door run over the uhp run
    of the same kind and round, taken back to back): the kinds' times differ, so pooling
    them into one median would measure where it falls between them, not the door."""
    print(f"first answer text, median of {tasks} per kind and way (seconds)")
    print(f"{'kind':<6} {'uhp':>8} {'door':>8} {'door/uhp':>9}")
    pairs = []
    for kind in TASKS:
        uhp, door = times[(kind, "uhp")], times[(kind, "door")]
        ratios = [d / u for d, u in zip(door, uhp, strict=True)]
        pairs += ratios
        row = f"{statistics.median(uhp):8.3f} {statistics.median(door):8.3f}"
        print(f"{kind:<6} {row} {statistics.median(ratios):9.3f}")
    overall = statistics.median(pairs)
    verdict = "met" if overall <= RATIO_TARGET else "NOT met"
    print(f"overall: median of {len(pairs)} paired ratios door/uhp {overall:.3f}")
    print(f"target ≤ {RATIO_TARGET}: {verdict}")


if __name__ == "__main__":
    main()
