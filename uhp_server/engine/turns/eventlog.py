"""A response's ordered event log: numbered, persisted, then published.

Each event is committed to the database before any subscriber sees it, so anything a client was
sent survives a crash. The write happens on the database's writer thread, never on the event
loop: an append numbers its events at once (so concurrent appenders keep an exact, gapless
order), queues them, and publishes them once the commit is done — in queue order, because the
writer commits in that order and hands each completion back to the loop in turn.
Subscribers read the in-memory tail while the task is live; a finished task's events are read
from the database (or from memory, when store is false).

Before an event is numbered, the turn's secrets (its model key and run token, its MCP
servers' credentials, the operator's provider keys) are redacted from it in every form
(gateway/scrubbing.py): the gateway already keeps them from the agent, and this keeps
whatever still carries one from being stored or shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import Future
from typing import Any

from storage import responses as response_store
from storage.db import Database, SessionRelease
from uhp_server.engine.reading.fold import TERMINAL_TYPES, fold
from uhp_server.gateway.scrubbing import NOTHING, Scrubber, scrubber


def numbered(event: dict[str, Any], seq: int) -> dict[str, Any]:
    """The event with its sequence number, `type` first as clients read it."""
    rest = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}
    return {"type": event["type"], "sequence_number": seq, **rest}


class EventLog:
    def __init__(
        self,
        db: Database,
        response_id: str,
        *,
        persist: bool,
        committed: list[dict[str, Any]] | tuple[()] = (),
    ) -> None:
        """`committed`: numbered events already written with the response row (its first
        event, in the transaction that accepted it); the log goes on after them."""
        self._db = db
        self.response_id = response_id
        self.persist = persist
        self.events: list[dict[str, Any]] = list(committed)  # published: committed, in order
        self._changed = asyncio.Event()  # replaced by a fresh one each time events arrive
        self._next_seq = len(self.events)
        self._ending = False  # a terminal event is queued: nothing may follow it
        self._queued = 0  # appends waiting for their commit
        # The session this task holds, released in the terminal event's own transaction.
        self.release_on_end: Callable[[], SessionRelease] | None = None
        self.released = False  # that transaction committed: the session is free
        self._secrets: list[tuple[str | None, ...]] = []
        self._scrubber: Scrubber = NOTHING

    def guard(self, *sets: Iterable[str | None]) -> None:
        """Redact these secrets too from every event appended from now on. In the sets the
        gateway uses (scrubbing.scrubber compiles each set once)."""
        self._secrets += [tuple(secrets) for secrets in sets]
        self._scrubber = scrubber(*self._secrets)

    @property
    def finished(self) -> bool:
        return bool(self.events) and self.events[-1]["type"] in TERMINAL_TYPES

    @property
    def ending(self) -> bool:
        """The terminal event is written or on its way: the outcome is decided."""
        return self._ending

    async def append(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        if self._ending:
            raise RuntimeError("event log already ended")
        events = [self._scrubber.scrub_json(event) for event in events]
        entries = [numbered(event, self._next_seq + i) for i, event in enumerate(events)]
        self._next_seq += len(entries)
        terminal = next((e for e in entries if e["type"] in TERMINAL_TYPES), None)
        self._ending = terminal is not None
        ends_unstored = terminal is not None and self.release_on_end is not None
        if not self.persist and self._queued == 0 and not ends_unstored:
            self._publish(entries)
            return
        final = terminal["response"] if terminal is not None else None
        # Not persisted but behind queued writes (the response was deleted mid-run): an empty
        # batch keeps its place in the queue, so the order stays exact.
        batch = response_store.event_batch(
            self.response_id, entries if self.persist else [], final if self.persist else None
        )
        if final is not None and not self.persist:
            batch.status = final["status"]  # an unkept response's end: its status alone
        if final is not None and self.release_on_end is not None:
            batch.release = self.release_on_end()
        loop = asyncio.get_running_loop()
        published: asyncio.Future[None] = loop.create_future()
        self._queued += 1

        def committed(write: Future[None]) -> None:  # on the writer thread
            loop.call_soon_threadsafe(
                self._committed, entries, write, published, batch.release is not None
            )

        self._db.append_events(batch).add_done_callback(committed)
        # Shielded: a cancelled appender must not unpublish what the writer committed.
        await asyncio.shield(published)

    def _committed(
        self,
        entries: list[dict[str, Any]],
        write: Future[None],
        published: asyncio.Future[None],
        released: bool,
    ) -> None:
        self._queued -= 1
        error = write.exception()
        if error is not None and self.persist:
            if self._next_seq == entries[-1]["sequence_number"] + 1:
                self._next_seq = entries[0]["sequence_number"]  # nothing was numbered after
                self._ending = False
            if not published.done():
                published.set_exception(error)
            return
        # (Unkept events are published even when their write failed: nothing of them was to be
        # stored, and the session is then released by RunRegistry.)
        self.released = self.released or (released and error is None)
        self._publish(entries)
        if not published.done():
            published.set_result(None)

    def _publish(self, entries: list[dict[str, Any]]) -> None:
        self.events.extend(entries)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def follow(self, after: int = -1) -> AsyncIterator[dict[str, Any]]:
        """Yield events with sequence_number > after, live, until the terminal event."""
        position = after + 1
        while True:
            while position < len(self.events):
                event = self.events[position]
                position += 1
                yield event
                if event["type"] in TERMINAL_TYPES:
                    return
            if self.finished:
                return  # resumed at or past the terminal event: nothing is left to send
            if position >= len(self.events):
                await self._changed.wait()

    async def wait_finished(self) -> None:
        while not self.finished:
            await self._changed.wait()

    def current(self) -> dict[str, Any]:
        return fold(self.events)
