"""The harness events feed (Streaming §5): what starts, progresses and finishes in a
harness's sessions, live, for `GET /v1/harnesses/{id}/events`.

In memory and best-effort by design: a client that needs every detail reads the response
itself. Each subscriber has a bounded queue; one that cannot keep up is dropped (its stream
ends) rather than ever slowing the engine down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from uhp_server.engine.reading.fold import TERMINAL_TYPES

log = logging.getLogger("uhp_server.feed")

QUEUE_SIZE = 256
# Response events the feed passes on; the rest (text deltas, argument fragments) stay in the
# response's own stream.
FORWARDED = frozenset(
    {"response.created", "response.in_progress", "response.output_item.done", *TERMINAL_TYPES}
)
_CLOSED = object()


@dataclass(eq=False)
class Subscriber:
    principal_id: str
    harness_id: str
    queue: asyncio.Queue[Any] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    dropped: bool = False
    since: float = field(default_factory=time.time)  # when it subscribed (wall clock)


class HarnessFeed:
    def __init__(self) -> None:
        self._subscribers: set[Subscriber] = set()
        # Told the number of subscribers each time it changes (engine/replicas/remote_feed.py).
        self.subscribers_changed: Callable[[int], None] | None = None

    def publish(self, principal_id: str, harness_id: str, event: dict[str, Any]) -> None:
        """Hand the event to every subscriber of that harness; never blocks, never raises."""
        for sub in list(self._subscribers):
            if sub.principal_id != principal_id or sub.harness_id != harness_id:
                continue
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                self._drop(sub)

    def _drop(self, sub: Subscriber) -> None:
        log.info("feed_subscriber_dropped", extra={"harness_id": sub.harness_id})
        sub.dropped = True
        self._unsubscribe(sub)
        with contextlib.suppress(asyncio.QueueEmpty):
            sub.queue.get_nowait()  # make room for the end marker
        sub.queue.put_nowait(_CLOSED)

    def subscribe(self, principal_id: str, harness_id: str) -> AsyncIterator[dict[str, Any]]:
        """The harness's events from now on, numbered from 0 for this subscriber.

        Registered before this returns, so nothing published after the call is missed (a
        subscriber whose stream is never read is dropped once its queue fills)."""
        sub = Subscriber(principal_id, harness_id)
        self._subscribers.add(sub)
        self._tell_count()
        return self._events(sub)

    def _unsubscribe(self, sub: Subscriber) -> None:
        if sub in self._subscribers:
            self._subscribers.discard(sub)
            self._tell_count()

    def _tell_count(self) -> None:
        if self.subscribers_changed is not None:
            self.subscribers_changed(len(self._subscribers))

    async def _events(self, sub: Subscriber) -> AsyncIterator[dict[str, Any]]:
        try:
            sequence = 0
            while True:
                event = await sub.queue.get()
                if event is _CLOSED:
                    return
                yield {"type": event["type"], "sequence_number": sequence, **_rest(event)}
                sequence += 1
        finally:
            self._unsubscribe(sub)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def watching_since(self) -> float | None:
        """When the longest-standing subscriber subscribed (None: nobody watches)."""
        return min((sub.since for sub in self._subscribers), default=None)


def _rest(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("type", "sequence_number")}


def feed_event(
    event: dict[str, Any],
    *,
    response_id: str,
    session_id: str,
    harness_id: str,
    new_session: bool,
) -> list[dict[str, Any]]:
    """The feed's view of one response event: a `session.created` before the first response
    of a new session, then the event itself with its session and response named."""
    kind = event["type"]
    if kind not in FORWARDED:
        return []
    context = {"session_id": session_id, "harness_id": harness_id}
    out = []
    if kind == "response.created" and new_session:
        out.append({"type": "session.created", **context})
    forwarded = {
        "type": kind,
        **context,
        "response_id": response_id,
        "response_sequence_number": event["sequence_number"],
    }
    for key in ("response", "item", "output_index"):
        if key in event:
            forwarded[key] = event[key]
    out.append(forwarded)
    return out
