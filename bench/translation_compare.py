"""The gateway's own wire translators against LiteLLM's bridges, side by side in one run.

    python bench/translation_compare.py [--litellm-python PYTHON] [--rounds N] [--smoke]

LiteLLM runs in its own scratch venv (never the project's; `python3 -m venv /tmp/litellm-venv
&& /tmp/litellm-venv/bin/pip install litellm`, the default --litellm-python; without it
LiteLLM's side is left out, loudly), through bench/_litellm_probe.py. Both sides
talk to the same in-process scripted provider's Chat Completions route and are given the
requests Codex and Claude Code really sent (tests/fixtures/gateway/). Printed:

- fidelity: per captured request, whether the answer the CLI would get says the same as the
  provider's native Responses / Messages answer (text, reasoning, tool calls with arguments,
  namespaces, stop reason, usage), and what each side sent upstream (roles, tools);
- cost per streamed chunk: a 2500-chunk answer read raw (httpx, the baseline), through our
  translator and through LiteLLM: p50/p99 of the time between consecutive events and the
  whole stream's time above the raw read, per upstream chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from tests.scripted_provider import start_provider
from tests.support.translations import translation_between
from tests.support.wire_summary import anthropic_summary, responses_summary, sse_events

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "gateway"
KEY = "sk-bench"
WIRES = {"codex": ("responses", responses_summary), "claude": ("anthropic", anthropic_summary)}
LONG_PROMPT = "SAY " + " ".join(f"{i:04d}" for i in range(2000))  # ~2500 4-char deltas


def cases() -> list[tuple[str, int, dict]]:
    """The captured requests of the CLIs whose wire LiteLLM also bridges (Gemini CLI's
    capture has no native answer to compare with)."""
    return [
        (capture.stem, n, body)
        for capture in sorted(FIXTURES.glob("*.json"))
        if capture.stem.split("_")[0] in WIRES
        for n, body in enumerate(json.loads(capture.read_text()))
    ]


def native_summary(stem: str, n: int) -> dict:
    summarize = WIRES[stem.split("_")[0]][1]
    return summarize(sse_events((FIXTURES / f"{stem}.{n}.native.sse").read_bytes()))


def differences(got: dict, want: dict) -> list[str]:
    return [f"{key}={got.get(key)!r}" for key in want if got.get(key) != want[key]]


def upstream_shape(body: dict) -> str:
    roles = "".join(m["role"][0] for m in body.get("messages") or [])
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    flat = sum("__" in n for n in tools)
    return f"roles={roles} tools={len(tools)} (namespaced {flat})"


def ours(client: httpx.Client, url: str) -> dict:
    rows = {}
    for stem, n, body in cases():
        wire, summarize = WIRES[stem.split("_")[0]]
        t = translation_between(wire, "chat")
        chat = t.request(body, model=body["model"])
        with client.stream("POST", f"{url}/chat/completions", json=chat) as resp:
            stream = t.stream()
            out = b"".join(stream.feed(chunk) for chunk in resp.iter_raw()) + stream.finish()
        got = summarize(sse_events(out))
        rows[f"{stem}.{n}"] = (differences(got, native_summary(stem, n)), upstream_shape(chat))
    return rows


def repeated_chunks() -> dict:
    """The same 4-character delta 200 times in a row, through our translators."""
    piece = {"choices": [{"index": 0, "delta": {"content": "===="}, "finish_reason": None}]}
    raw = b"".join(f"data: {json.dumps(piece)}\n\n".encode() for _ in range(200))
    raw += b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    rows = {}
    for label, wire in (("repeated chunks", "responses"), ("repeated chunks ", "anthropic")):
        stream = translation_between(wire, "chat").stream()
        out = sse_events(stream.feed(raw) + stream.finish())
        text = "".join(
            e.get("delta", {}).get("text", "") if wire == "anthropic" else e.get("delta", "")
            for e in out
            if "delta" in e and e.get("type", "").endswith(("text.delta", "block_delta"))
        )
        rows[label] = (["ok" if text == "=" * 800 else "cut"], wire)
    return rows


def litellm(python: str, provider, rounds: int) -> tuple[dict, dict, list[str]]:
    provider.reset()
    argv = [python, str(ROOT / "bench" / "_litellm_probe.py"), provider.base_url, KEY]
    argv += [str(FIXTURES), LONG_PROMPT, str(rounds)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd="/tmp", check=True)
    result = json.loads(done.stdout)
    rows = {}
    for stem, n, _ in cases():
        case = f"{stem}.{n}"
        if case in result["errors"]:
            rows[case] = ([f"refused: {result['errors'][case]}"], "-")
            continue
        if stem.startswith("codex"):
            got = responses_summary(result["responses"][case])
        else:
            got = anthropic_summary(sse_events(result["anthropic"][case].encode()))
        sent = result["sent"][case]
        shape = " + ".join(upstream_shape(body) for body in sent) or "nothing sent"
        rows[case] = (differences(got, native_summary(stem, n)), shape)
    rows["repeated chunks"] = ([result["repeated"].get("responses", "?")], "")
    rows["repeated chunks "] = ([result["repeated"].get("anthropic", "?")], "")
    missing = [k for k in ("responses", "anthropic") if not result[k]]
    return rows, result["gaps"], missing


async def our_timing(url: str, wire: str | None) -> dict:
    """Like the probe's: gaps between the events a client gets, and the whole time."""
    body = {
        "model": "gpt-test",
        "stream": True,
        "messages": [{"role": "user", "content": LONG_PROMPT}],
    }
    stamps = []
    started = time.perf_counter()
    stream = translation_between(wire, "chat").stream() if wire else None
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream(
            "POST", f"{url}/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}
        ) as resp,
    ):
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                continue
            out = stream.feed(f"{line}\n\n".encode()) if stream else line
            if out:
                stamps.append(time.perf_counter())
    if stream:
        stream.finish()
    return {
        "gaps": [b - a for a, b in itertools.pairwise(stamps)],
        "total": time.perf_counter() - started,
    }


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def timing_line(name: str, runs: list[dict], raw_total: float, chunks: int) -> str:
    gaps = [g for run in runs for g in run["gaps"]]
    total = statistics.median(run["total"] for run in runs)
    added = (total - raw_total) / chunks
    return (
        f"  {name:<22} event gap p50 {statistics.median(gaps) * 1e6:7.1f} µs "
        f"p99 {percentile(gaps, 0.99) * 1e6:8.1f} µs   stream {total * 1e3:7.1f} ms "
        f"(+{added * 1e6:6.1f} µs per chunk over raw)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--litellm-python", default=_smoke.LITELLM_PYTHON)
    parser.add_argument("--rounds", type=int, default=3)
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), rounds=1)
    why = _smoke.litellm_absent(args.litellm_python)
    if why:
        _smoke.left_out(_smoke.LITELLM, "LiteLLM's side", why)
    provider = start_provider(KEY, ["gpt-test", "claude-test"])
    theirs: dict = {}
    their_gaps: dict = {}
    missing: list[str] = []
    try:
        with httpx.Client(headers={"authorization": f"Bearer {KEY}"}, timeout=60) as client:
            mine = ours(client, provider.base_url)
        if not why:
            theirs, their_gaps, missing = litellm(args.litellm_python, provider, args.rounds)

        async def timings() -> dict:
            out = {}
            for name, wire in (
                ("raw", None),
                ("responses", "responses"),
                ("anthropic", "anthropic"),
            ):
                await our_timing(provider.base_url, wire)  # warm-up
                out[name] = [await our_timing(provider.base_url, wire) for _ in range(args.rounds)]
            return out

        our_gaps = asyncio.run(timings())
    finally:
        provider.stop()
    mine.update(repeated_chunks())
    print("fidelity on captured traffic (fields that differ from the native answer)")
    for case in mine:
        print(f"  {case:<16} ours: {', '.join(mine[case][0]) or 'same':<28} {mine[case][1]}")
        differ, sent = theirs.get(case, (["not run"], ""))
        print(f"  {'':<16} litellm: {', '.join(differ) or 'same':<25} {sent}")
    if missing:
        print(f"  litellm produced nothing for: {missing}")
    chunks = len(LONG_PROMPT) // 4 + 3
    print(f"cost per streamed chunk ({chunks} upstream chunks, median of {args.rounds} streams)")
    sides = [("ours", our_gaps)] + ([("litellm", their_gaps)] if their_gaps else [])
    for label, gaps in sides:
        raw_total = statistics.median(run["total"] for run in gaps["raw"])
        print(timing_line(f"{label} raw read", gaps["raw"], raw_total, chunks))
        for wire in ("responses", "anthropic"):
            print(timing_line(f"{label} {wire}", gaps[wire], raw_total, chunks))


if __name__ == "__main__":
    main()
