"""PostgreSQL LISTEN on one connection per replica, fanned out to whoever waits in this
process: a stream tailing a response that runs elsewhere, the owner of a turn another replica
asked to cancel, a turn waiting in the shared admission line.

Waiters never depend on a notification alone: they also poll on a timeout, so one lost while
the connection was being re-made only delays them. A re-made connection wakes every waiter.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger("uhp_server.notifications")

RETRY_SECONDS = 1.0


class Notifications:
    def __init__(self, conninfo: str, channels: tuple[str, ...]) -> None:
        self._conninfo = conninfo
        self._channels = channels
        self._changed: dict[tuple[str, str], asyncio.Event] = {}
        self._watchers: collections.Counter[tuple[str, str]] = collections.Counter()
        self._handlers: dict[str, Callable[[str], None]] = {}
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()  # set while the connection is up

    def changed(self, channel: str, key: str) -> asyncio.Event:
        """An event set at the next notification of `key` on `channel`. Take it BEFORE
        reading what it announces, then wait on it: nothing falls in between. Take it inside
        `watching(channel, key)`, so that it goes once nobody waits for that key any more
        (the last notification of a response often came before its last waiter's look)."""
        return self._changed.setdefault((channel, key), asyncio.Event())

    @contextlib.contextmanager
    def watching(self, channel: str, key: str) -> Iterator[None]:
        """While a waiter takes `changed(channel, key)` events: the last one out drops it."""
        watched = (channel, key)
        self._watchers[watched] += 1
        try:
            yield
        finally:
            self._watchers[watched] -= 1
            if self._watchers[watched] <= 0:
                del self._watchers[watched]
                self._changed.pop(watched, None)

    def on(self, channel: str, handler: Callable[[str], None]) -> None:
        """Call `handler(payload)` on the event loop for every notification on `channel`."""
        self._handlers[channel] = handler

    async def open(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="listen")
        with contextlib.suppress(TimeoutError):  # not up yet: waiters poll meanwhile
            await asyncio.wait_for(self.listening.wait(), timeout=5)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _listen(self) -> None:
        import psycopg  # only a PostgreSQL deployment listens

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    for channel in self._channels:
                        await conn.execute(f'LISTEN "{channel}"')
                    self.listening.set()
                    self._wake_all()  # anything sent while it was down: everyone looks again
                    async for note in conn.notifies():
                        self._deliver(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: listen again when it is back
                log.warning("listen_lost", extra={"error": str(exc)})
            self.listening.clear()
            await asyncio.sleep(RETRY_SECONDS)

    def _deliver(self, channel: str, payload: str) -> None:
        event = self._changed.pop((channel, payload), None)
        if event is not None:
            event.set()
        handler = self._handlers.get(channel)
        if handler is not None:
            try:
                handler(payload)
            except Exception:
                log.exception("notification_handler_failed", extra={"channel": channel})

    def _wake_all(self) -> None:
        waiting, self._changed = self._changed, {}
        for event in waiting.values():
            event.set()
        for handler in self._handlers.values():
            with contextlib.suppress(Exception):
                handler("")  # "": look at everything, something may have been missed


def conninfo_of(db: Any) -> str:
    """The libpq connection string of the database's raw backend."""
    return str(db.raw.conninfo)
