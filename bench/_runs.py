"""What the scripts that start servers and CLIs share: their log, a scratch folder, and how a
run that did not finish ends (an exit status, with everything it started already stopped by
the `with` blocks it unwound)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from uhp_server.engine.reading.fold import TERMINAL_TYPES

Result = TypeVar("Result")


class BenchError(RuntimeError):
    """A run did not do what it asked; its timing would mean nothing."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def scratch_folder(prefix: str = "bench-") -> Iterator[Path]:
    """A folder removed at the end. Not under /tmp: Codex skips some start-up work for homes
    in temporary folders, and the server's sandbox homes are never there either."""
    cache = Path.home() / ".cache" / "uhp-server"
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=cache) as scratch:
        yield Path(scratch)


def finished(run: Callable[[], Result]) -> Result | int:
    """`run`'s result, or the exit status of a run that did not finish: 130 interrupted
    (SIGTERM unwinds like Ctrl-C, so what it started is stopped either way), 1 a BenchError."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return run()
    except KeyboardInterrupt:
        log("interrupted; everything the bench started has been stopped")
        return 130
    except BenchError as exc:
        log(f"bench failed: {exc}")
        return 1


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON events of a server-sent event stream's lines."""
    data: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and data:
            yield json.loads("\n".join(data))
            data = []


@dataclass(frozen=True)
class Streamed:
    """One `POST /v1/responses` with `stream: true`, timed from the request."""

    first: dict[str, float]  # seconds to the first event of each type asked for, when seen
    total: float  # seconds to the terminal event
    final: dict[str, Any]  # the terminal event's response


def streamed_response(
    client: httpx.Client, body: dict[str, object], first_of: tuple[str, ...]
) -> Streamed:
    """Streams one task to its terminal event; BenchError for a refusal or a stream that
    ends without one."""
    first: dict[str, float] = {}
    started = time.perf_counter()
    with client.stream("POST", "/v1/responses", json={**body, "stream": True}) as response:
        if response.status_code != 200:
            raise BenchError(f"server answered {response.status_code}: {response.read()!r}")
        for event in sse_events(response.iter_lines()):
            if event["type"] in first_of and event["type"] not in first:
                first[event["type"]] = time.perf_counter() - started
            elif event["type"] in TERMINAL_TYPES:
                return Streamed(first, time.perf_counter() - started, event["response"])
    raise BenchError("the stream ended without a terminal event")


def output_text(response: dict[str, Any]) -> str:
    """The text of a response's messages."""
    return "".join(
        part.get("text", "")
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )
