"""Reading a request body with a cap, so that no client of the gateway (the agent, from inside
the sandbox) can make the server hold an unbounded body in memory."""

from __future__ import annotations

from fastapi import Request


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The request body, or None past `limit` bytes (stops reading there, not after)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)
