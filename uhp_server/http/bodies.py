"""Reading a request body with a cap, so that no client (an API caller, a platform, the agent
from inside its sandbox) can make the server hold an unbounded body in memory: refused on
its declared length before a byte is read, else where the cap is passed, not after."""

from __future__ import annotations

from fastapi import Request


def declared_length(request: Request) -> int | None:
    """The Content-Length the client declared, when it is a plain number (ASCII digits:
    `str.isdigit()` also takes "²", which `int()` then refuses)."""
    declared = request.headers.get("content-length", "")
    return int(declared) if declared.isascii() and declared.isdigit() else None


async def read_within(request: Request, limit: int) -> bytearray | None:
    """The body in one buffer (a large one is never copied whole: json reads a bytearray),
    or None past `limit` bytes, declared or sent."""
    declared = declared_length(request)
    if declared is not None and declared > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return body


async def read_capped(request: Request, limit: int) -> bytes | None:
    """`read_within`, as bytes."""
    body = await read_within(request, limit)
    return None if body is None else bytes(body)
