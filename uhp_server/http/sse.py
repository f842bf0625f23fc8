"""Server-Sent Events delivery (Streaming §1): one event per message, flushed as written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from uhp_server.http.while_allowed import while_allowed

# Every message ends with LF LF, as the OpenAI API frames them. The SSE standard allows CRLF
# too (sse-starlette's default), but clients that split a stream on "\n\n", the protocol's
# conformance suite among them, then see no events at all.
SEPARATOR = "\n"
STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    # Tells nginx-style proxies not to buffer: a buffered stream looks exactly like a hang.
    "X-Accel-Buffering": "no",
}


class KeepAlive(ServerSentEvent):
    """`: keep-alive` as a lone comment line, without the blank line that ends an event.

    Clients keep the last event id across events (as the SSE spec says), and the official
    `openai` SDK then dispatches a comment-plus-blank-line block as an event with empty
    data, which it cannot parse: a keep-alive after the first event broke its streams."""

    def __init__(self) -> None:
        super().__init__(comment="keep-alive", sep=SEPARATOR)

    def encode(self) -> bytes:
        return f": keep-alive{self._sep}".encode()


def sse_response(
    events: AsyncIterator[dict[str, Any]],
    keepalive_seconds: float,
    allowed: Callable[[], Awaitable[bool]] | None = None,
) -> Any:
    """The events as a stream; with `allowed`, only while it holds (asked about once a
    second: a revoked key's open stream is closed, as its next request is refused)."""
    if allowed is not None:
        events = while_allowed(events, allowed)

    async def messages() -> AsyncIterator[ServerSentEvent]:
        async for event in events:
            yield ServerSentEvent(
                data=json.dumps(event, separators=(",", ":")),
                event=event["type"],
                id=str(event["sequence_number"]),
                sep=SEPARATOR,
            )

    return EventSourceResponse(
        messages(),
        headers=STREAM_HEADERS,
        ping=keepalive_seconds,
        ping_message_factory=KeepAlive,
        sep=SEPARATOR,
    )
