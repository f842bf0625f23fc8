"""Snapshots (Memories §5.3): a name for an instant of one memory, and what a request to take
one states, checked. A snapshot copies nothing: reading `as_of` its instant is the same read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uhp_server.memories.errors import memory_invalid
from uhp_server.memories.records import Writer

MAX_NAME = 200
MAX_MESSAGE = 2000


@dataclass(frozen=True)
class Snapshot:
    id: str
    memory_id: str
    name: str
    message: str
    at_ms: int
    written_by: Writer


def stated_snapshot(body: dict[str, Any]) -> tuple[str, str]:
    """The name and the message; memory_invalid, naming the field, otherwise."""
    name, message = body.get("name"), body.get("message", "")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise memory_invalid(f"`name` is text of 1 to {MAX_NAME} characters.", "name")
    if not isinstance(message, str) or len(message) > MAX_MESSAGE:
        raise memory_invalid(f"`message` is text of at most {MAX_MESSAGE} characters.", "message")
    return name, message
