"""A response's ordered event log: numbered, persisted, then published.

Each event is written to SQLite before any subscriber sees it, so anything a client was sent
survives a crash. Subscribers read the in-memory tail while the task is live; a finished
task's events are read from the database (or from memory, when store is false).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from storage import responses as response_store
from storage.db import Database
from uhp_server.engine.fold import TERMINAL_TYPES, fold


def numbered(event: dict[str, Any], seq: int) -> dict[str, Any]:
    """The event with its sequence number, `type` first as clients read it."""
    rest = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}
    return {"type": event["type"], "sequence_number": seq, **rest}


class EventLog:
    def __init__(self, db: Database, response_id: str, *, persist: bool) -> None:
        self._db = db
        self.response_id = response_id
        self.persist = persist
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Condition()

    @property
    def finished(self) -> bool:
        return bool(self.events) and self.events[-1]["type"] in TERMINAL_TYPES

    async def append(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        if self.finished:
            raise RuntimeError("event log already ended")
        for event in events:
            entry = numbered(event, len(self.events))
            if self.persist:
                response_store.append_event(
                    self._db, self.response_id, entry["sequence_number"], entry
                )
            self.events.append(entry)
            if self.persist and entry["type"] in TERMINAL_TYPES:
                response_store.finish_response(self._db, self.response_id, entry["response"])
        async with self._changed:
            self._changed.notify_all()

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
            async with self._changed:
                if position >= len(self.events):
                    await self._changed.wait()

    async def wait_finished(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.finished)

    def current(self) -> dict[str, Any]:
        return fold(self.events)
