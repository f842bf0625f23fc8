"""Read a Server-Sent Events stream the way a client does, keeping comments for inspection."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Stream:
    events: list[dict[str, Any]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


def parse_lines(lines: Any, into: Stream, stop_after: int | None = None) -> Stream:
    data: list[str] = []
    for line in lines:
        if line.startswith(":"):
            into.comments.append(line[1:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith("id:"):
            into.ids.append(line[3:].strip())
        elif line.startswith("event:"):
            into.names.append(line[6:].strip())
        elif line == "" and data:
            into.events.append(json.loads("\n".join(data)))
            data = []
            if stop_after is not None and len(into.events) >= stop_after:
                break
    return into


def read_stream(
    client: httpx.Client, method: str, url: str, stop_after: int | None = None, **kwargs: Any
) -> Stream:
    """Open the stream and read it to the end (or until stop_after events, then hang up)."""
    with client.stream(method, url, **kwargs) as response:
        assert response.status_code == 200, response.read().decode()
        result = Stream(headers=dict(response.headers))
        return parse_lines(response.iter_lines(), result, stop_after)
