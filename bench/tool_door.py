"""What does calling a harness as a tool add over the same UHP task?

One real `uhp-server serve` (the base under `--base`, the scripted provider), the same
scripted task run three ways, interleaved so the machine's drift hits all of them alike:

- uhp: `POST /v1/responses` (blocking), the reference;
- http: `POST /oumi/tools/<harness_id>`;
- mcp: the platform's stateless `tools/call` on `POST /mcp`.

Each call starts a new session. Prints the median and p90 wall time of each and the ratio
of each door's median to the UHP one (target ≤ 1.05). Usage:

    python bench/tool_door.py [--base B] [--rounds N] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, server_env
from tests.scripted_provider import start_provider
from tests.support.server import ServerProcess

RATIO_TARGET = 1.05
PROMPT, ANSWER = "RUN echo hi\nSAY got {output}", "got hi"


def uhp(http: httpx.Client, harness_id: str) -> str:
    body = {"input": PROMPT, "metadata": {"harness_id": harness_id}}
    response = http.post("/v1/responses", json=body).json()
    texts = [
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    ]
    return texts[-1] if texts else ""


def tool_http(http: httpx.Client, harness_id: str) -> str:
    return http.post(
        f"/oumi/tools/{harness_id}?timeout_seconds=120", json={"prompt": PROMPT}
    ).json()["text"]


def tool_mcp(http: httpx.Client, harness_id: str) -> str:
    params = {"name": harness_id, "arguments": {"prompt": PROMPT}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    answer = http.post("/mcp?timeout_seconds=120", json=message).json()
    return answer["result"]["structuredContent"]["text"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="codex")
    parser.add_argument("--rounds", type=int, default=10)
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), rounds=1)
    modes: dict[str, Callable[[httpx.Client, str], str]] = {
        "uhp": uhp,
        "http": tool_http,
        "mcp": tool_mcp,
    }
    times: dict[str, list[float]] = {name: [] for name in modes}
    with (
        start_provider(PROVIDER_KEY, MODELS) as provider,
        tempfile.TemporaryDirectory() as scratch,
    ):
        env = server_env(provider, UHP_BASES=args.base)
        server = ServerProcess(Path(scratch), env).start()
        try:
            headers = {"Authorization": f"Bearer {API_KEY}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=180) as http:
                harness_id = http.get("/v1/harnesses").json()["harnesses"][0]["id"]
                for run in modes.values() if not args.smoke else ():  # one warm-up each
                    run(http, harness_id)
                for round_no in range(args.rounds):
                    order = list(modes.items())
                    order = order[round_no % 3 :] + order[: round_no % 3]
                    for name, run in order:
                        started = time.perf_counter()
                        answer = run(http, harness_id)
                        times[name].append(time.perf_counter() - started)
                        if answer != ANSWER:
                            raise SystemExit(f"{name} answered {answer!r}, not {ANSWER!r}")
        finally:
            server.stop()
    reference = statistics.median(times["uhp"])
    print(f"base {args.base}, {args.rounds} rounds, each call a new session")
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:>5}: median {median * 1000:7.0f} ms  p90 {percentile(values, 0.9) * 1000:7.0f}"
            f" ms  ratio {median / reference:.3f} (target ≤ {RATIO_TARGET})"
        )


if __name__ == "__main__":
    main()
