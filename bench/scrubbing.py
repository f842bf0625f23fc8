"""What does scrubbing secrets in every form (uhp_server/gateway/scrubbing.py) cost a body?

For 1, 3 and 10 secrets in one set, and for the gateway's shape (the operator's two keys in
one set, a model connection's key and run token in another), the median time to scrub 1 MB
of each kind of body, whole and as a stream of 4 KB chunks (the gateway's relay), and the
time to compile a set's expression the first time. The kinds:
an SSE answer of Chat Completions deltas (what the gateway relays most), a JSON body dense in
escapes and percent signs (where each position is a candidate), base64 noise (an image), and
a body holding each secret once in each form (what it must find). Usage:

    python bench/scrubbing.py [--rounds N]   # default N=7
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import random
import statistics
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from uhp_server.gateway.scrubbing import Scrubber, StreamScrubber, scrubber

MB = 1 << 20
CHUNK = 4096


def secrets_of(count: int) -> list[str]:
    rng = random.Random(count)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
    return ["sk-" + "".join(rng.choice(alphabet) for _ in range(48)) for _ in range(count)]


def sse_body() -> bytes:
    events: list[bytes] = []
    size, words = 0, ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    while size < MB:
        delta = {"choices": [{"index": 0, "delta": {"content": " ".join(words[:5]) + " "}}]}
        events.append(f"data: {json.dumps(delta)}\n\n".encode())
        size += len(events[-1])
        words = words[1:] + words[:1]
    return b"".join(events)[:MB]


def escape_dense_body() -> bytes:
    line = json.dumps({"path": "C:\\dir\\file", "q": "a%20b%2Fc", "u": "\u00e9\u00e8/\u4e2d"})
    return (line.encode() * (MB // len(line) + 1))[:MB]


def base64_body() -> bytes:
    return base64.b64encode(random.Random(1).randbytes(MB))[:MB]


def every_form_body(secrets: list[str]) -> bytes:
    forms = []
    for s in secrets:
        escaped = "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(s))
        forms += [s, escaped, urllib.parse.quote(s, safe=""), base64.b64encode(s.encode()).decode()]
    filler = escape_dense_body()[: MB // 2]
    return filler + " ".join(forms).encode() + filler


def timed_ms(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    """The median and the fastest of `rounds` runs, in ms (the fastest: the cost itself, on a
    machine whose other work only ever adds to it)."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, min(times) * 1000


def streamed(scrub: Scrubber, body: bytes) -> bytes:
    stream = StreamScrubber(scrub)
    out = [stream.feed(body[i : i + CHUNK]) for i in range(0, len(body), CHUNK)]
    return b"".join(out) + stream.finish()


def report(label: str, scrub: Scrubber, secrets: list[str], rounds: int) -> None:
    bodies = {
        "sse": sse_body(),
        "escape-dense": escape_dense_body(),
        "base64": base64_body(),
        "every-form": every_form_body(secrets),
    }
    for name, body in bodies.items():
        whole, whole_best = timed_ms(functools.partial(scrub.scrub, body), rounds)
        stream, stream_best = timed_ms(functools.partial(streamed, scrub, body), rounds)
        found = scrub.scrub(body).count(b"[redacted]")
        print(
            f"{label:<20} {name:<13} {whole:>6.1f} / {whole_best:<5.1f}"
            f" {stream:>6.1f} / {stream_best:<5.1f} {found:>5}"
        )


def compiled_ms(count: int, rounds: int) -> tuple[float, float]:
    """The median and fastest compile of a set of `count` secrets never compiled before."""
    times = []
    for round_ in range(rounds):
        fresh = [f"{secret}-{round_}" for secret in secrets_of(count)]
        started = time.perf_counter()
        scrubber(fresh)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, min(times) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(argv), rounds=1)
    print(f"{'secrets':<20} {'body (1 MB)':<13} {'whole ms':>14} {'stream ms':>14} found")
    print(f"{'':<20} {'':<13} {'median / best':>14} {'median / best':>14}")
    for count in (1, 3, 10):
        secrets = secrets_of(count)
        report(f"{count} in one set", scrubber(secrets), secrets, args.rounds)
    # The gateway's shape: the operator's two keys (compiled once per process) and a model
    # connection's key and run token (compiled for each turn, off the event loop).
    operator, connection = secrets_of(2), secrets_of(4)[2:]
    report(
        "2 operator + 2 turn", scrubber(operator, connection), operator + connection, args.rounds
    )
    for count in (1, 2, 3, 10):
        median, best = compiled_ms(count, args.rounds)
        print(f"compiling a set of {count:>2}: {median:.1f} ms median, {best:.1f} ms best")
    return 0


if __name__ == "__main__":
    sys.exit(main())
