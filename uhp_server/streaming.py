"""Server-Sent Events delivery (Streaming §1): one event per message, flushed as written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    # Tells nginx-style proxies not to buffer: a buffered stream looks exactly like a hang.
    "X-Accel-Buffering": "no",
}


def sse_response(events: AsyncIterator[dict[str, Any]], keepalive_seconds: float) -> Any:
    async def messages() -> AsyncIterator[ServerSentEvent]:
        async for event in events:
            yield ServerSentEvent(
                data=json.dumps(event, separators=(",", ":")),
                event=event["type"],
                id=str(event["sequence_number"]),
            )

    return EventSourceResponse(
        messages(),
        headers=STREAM_HEADERS,
        ping=keepalive_seconds,
        ping_message_factory=lambda: ServerSentEvent(comment="keep-alive"),
    )
