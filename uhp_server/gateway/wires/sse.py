"""Server-sent events, both ways: an incremental decoder for upstream bytes that arrive split
at any byte boundary, and the encoder for the events the CLI reads."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass
class SSEEvent:
    event: str | None
    data: str


class SSEDecoder:
    """Turns a byte stream into whole events; a partial event waits for its next bytes."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        # CRLF is folded to LF; a CR left at the end is folded once its LF arrives.
        self._buffer = (self._buffer + chunk).replace(b"\r\n", b"\n")
        *blocks, self._buffer = self._buffer.split(b"\n\n")
        return [event for block in blocks if (event := _parse_block(block)) is not None]

    def flush(self) -> list[SSEEvent]:
        """At EOF: the last event even without its blank line."""
        block, self._buffer = self._buffer, b""
        event = _parse_block(block)
        return [event] if event is not None else []


def _parse_block(block: bytes) -> SSEEvent | None:
    name: str | None = None
    data: list[str] = []
    for line in block.decode("utf-8", errors="replace").split("\n"):
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    return SSEEvent(name, "\n".join(data)) if data else None


def encode(data: dict, event: str | None = None) -> bytes:
    """One SSE message; `event` adds the `event:` line both target wires send."""
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()
