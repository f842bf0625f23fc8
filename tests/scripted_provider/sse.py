"""Server-sent-event framing and pacing shared by the wire adapters."""

from __future__ import annotations

import asyncio
import json

from .script import Reply

CREATED = 1735689600  # fixed timestamp (2025-01-01T00:00:00Z) for deterministic bodies


def sse(data: dict | str, event: str | None = None) -> str:
    """One SSE message; ``event`` adds an ``event:`` line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n"


async def pace(reply: Reply) -> None:
    """Wait between final-answer deltas so that SLOW spreads them over its duration."""
    if reply.slow > 0:
        await asyncio.sleep(reply.slow / len(reply.deltas()))
