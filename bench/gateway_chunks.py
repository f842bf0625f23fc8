"""What the gateway's wire translators cost per streamed chunk.

    python bench/gateway_chunks.py [--rounds N]

Builds a Chat Completions stream the way OpenAI-compatible servers send it (a chunk per SSE
event: 200 reasoning deltas, 2000 text deltas, then two parallel tool calls with 300 argument
fragments each, a finish and a usage chunk), feeds it to each translator one chunk at a time
and prints the time per `feed()` call, p50 and p99 (target p99 < 1 ms). `chunk_costs()` is
there for bench/gateway.py to call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from tests.support.translations import translation_between

TARGET_P99_SECONDS = 0.001


def _chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1735689600,
        "model": "bench-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
        if usage is None
        else [],
        "usage": usage,
    }
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


def chat_stream_chunks() -> list[bytes]:
    """One realistic streamed answer, as the upstream's SSE events."""
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"reasoning_content": f"th{i:03d} "}) for i in range(200)]
    chunks += [_chunk({"content": f"w{i:04d} "}) for i in range(2000)]
    for index in (0, 1):
        head = {"index": index, "id": f"call_{index}", "type": "function"}
        first = {**head, "function": {"name": "exec_command", "arguments": '{"cmd": "'}}
        chunks.append(_chunk({"tool_calls": [first]}))
        for i in range(300):
            fragment = {"index": index, "function": {"arguments": f"echo {i:03d}; "}}
            chunks.append(_chunk({"tool_calls": [fragment]}))
        closing = {"index": index, "function": {"arguments": '"}'}}
        chunks.append(_chunk({"tool_calls": [closing]}))
    chunks.append(_chunk({}, "tool_calls"))
    usage = {"prompt_tokens": 5000, "completion_tokens": 3000, "total_tokens": 8000}
    chunks.append(_chunk({}, usage=usage))
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def chunk_costs(wire: str, chunks: list[bytes] | None = None) -> list[float]:
    """Seconds each `feed()` took for one stream of `chunks`, plus the closing `finish()`."""
    chunks = chunks or chat_stream_chunks()
    stream = translation_between(wire, "chat").stream()
    costs = []
    for chunk in chunks:
        started = time.perf_counter()
        stream.feed(chunk)
        costs.append(time.perf_counter() - started)
    started = time.perf_counter()
    stream.finish()
    costs.append(time.perf_counter() - started)
    return costs


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5, help="streams per wire (default 5)")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), rounds=1)
    chunks = chat_stream_chunks()
    print(f"{len(chunks)} upstream chunks per stream, {args.rounds} streams per wire")
    met = True
    for wire in ("responses", "anthropic"):
        chunk_costs(wire, chunks)  # warm-up
        costs = [c for _ in range(args.rounds) for c in chunk_costs(wire, chunks)]
        p50, p99 = statistics.median(costs), percentile(costs, 0.99)
        met = met and p99 < TARGET_P99_SECONDS
        print(
            f"{wire:>9} over chat: p50 {p50 * 1e6:7.1f} µs  p99 {p99 * 1e6:7.1f} µs  "
            f"max {max(costs) * 1e6:8.1f} µs  (p99 target < {TARGET_P99_SECONDS * 1e6:.0f} µs)"
        )
    print("target met" if met else "target NOT met")


if __name__ == "__main__":
    main()
