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


def median_ms(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


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
        whole = median_ms(functools.partial(scrub.scrub, body), rounds)
        stream = median_ms(functools.partial(streamed, scrub, body), rounds)
        found = scrub.scrub(body).count(b"[redacted]")
        print(f"{label:<22} {name:<13} {whole:>9.1f} {stream:>10.1f}  {found}")


def compiled_ms(*sets: list[str]) -> tuple[Scrubber, float]:
    started = time.perf_counter()
    scrub = scrubber(*sets)
    return scrub, (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"{'secrets':<22} {'body (1 MB)':<13} {'whole ms':>9} {'stream ms':>10}  found")
    for count in (1, 3, 10):
        secrets = secrets_of(count)
        scrub, ms = compiled_ms(secrets)
        report(f"{count} in one set", scrub, secrets, args.rounds)
        print(f"{count} in one set: compiled once in {ms:.1f} ms")
    # The gateway's shape: the operator's two keys (compiled once per process) and a model
    # connection's key and run token (compiled for each turn, off the event loop).
    operator, connection = secrets_of(2), secrets_of(4)[2:]
    scrubber(operator)
    scrub, ms = compiled_ms(operator, connection)
    report("2 operator + 2 turn", scrub, operator + connection, args.rounds)
    print(f"a turn's set of 2: compiled in {ms:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
