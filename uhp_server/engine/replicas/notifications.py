"""PostgreSQL LISTEN on one connection per replica, fanned out to whoever waits in this
process: a stream tailing a response that runs elsewhere, the owner of a turn another replica
asked to cancel, a turn waiting in the shared admission line.

Waiters never depend on a notification alone: they also poll on a timeout, so one lost while
the connection was being re-made only delays them. A re-made connection wakes every waiter.

A channel named `on_demand` is listened to only while somebody here wants it (a waiter
`watching` one of its keys, or `want`): while any replica hears `uhp_events`, every replica's
every commit of events is told on it, and a replica with nobody tailing a turn of another
would take each of them only to drop it. It is let go LINGER_SECONDS after the last one
stopped wanting it. `announce` is called on the listening connection after such a LISTEN and
before its UNLISTEN, and with False on each new connection for a channel nobody here wants: a
replica says in the database whether it hears events, and they are told only while one does
(migration 0008).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

log = logging.getLogger("uhp_server.notifications")

RETRY_SECONDS = 1.0
# An on-demand channel is let go this long after the last one wanting it is gone (tails of
# other replicas' turns come and go: not a LISTEN and an UNLISTEN for each).
LINGER_SECONDS = 10.0
LOCK_TIMEOUT = "1s"  # the listening connection's statements wait no longer for a lock


class Notifications:
    def __init__(
        self,
        conninfo: str,
        channels: tuple[str, ...],
        on_demand: tuple[str, ...] = (),
        announce: Callable[[Any, str, bool], Awaitable[None]] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._channels = channels
        self._on_demand = on_demand
        self._announce = announce  # (connection, on-demand channel, listened to now)
        self._changed: dict[tuple[str, str], asyncio.Event] = {}
        self._watchers: collections.Counter[tuple[str, str]] = collections.Counter()
        self._handlers: dict[str, Callable[[str], None]] = {}
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()  # set while the connection is up
        self._wanted: collections.Counter[str] = collections.Counter()  # on-demand channels
        self._unwanted_since: dict[str, float] = {}  # wanted no more, still listened to
        self._heard: dict[str, asyncio.Event] = {}  # set while the channel is listened to
        self._wants_changed = asyncio.Event()
        self._announcing_again = False

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
            with self.want(channel):
                yield
        finally:
            self._watchers[watched] -= 1
            if self._watchers[watched] <= 0:
                del self._watchers[watched]
                self._changed.pop(watched, None)

    @contextlib.contextmanager
    def want(self, channel: str) -> Iterator[None]:
        """While inside: an on-demand `channel` is listened to (a no-op for the others)."""
        self.add_want(channel)
        try:
            yield
        finally:
            self.drop_want(channel)

    def add_want(self, channel: str) -> None:
        """`want(channel)` for a holder that is no block of code (drop it with `drop_want`)."""
        if channel in self._on_demand:
            self._wanted[channel] += 1
            self._wants_changed.set()

    def drop_want(self, channel: str) -> None:
        if channel not in self._on_demand:
            return
        self._wanted[channel] -= 1
        if self._wanted[channel] <= 0:
            del self._wanted[channel]
            self._unwanted_since[channel] = time.monotonic()
            self._wants_changed.set()

    async def heard(self, channel: str, timeout: float) -> None:
        """Until `channel` is listened to (at most `timeout` seconds: waiters poll anyway).
        After `want(channel)` and before reading what it announces, so nothing falls between."""
        if channel in self._on_demand:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heard_event(channel).wait(), timeout)

    def announce_again(self) -> None:
        """Call `announce` again for the on-demand channels listened to (what it recorded may
        have been lost: a lapsed lease's row made anew)."""
        self._announcing_again = True
        self._wants_changed.set()

    def _heard_event(self, channel: str) -> asyncio.Event:
        return self._heard.setdefault(channel, asyncio.Event())

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
                    # Never stuck behind a row another transaction holds: reconnect instead.
                    await conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
                    for channel in self._channels:
                        await conn.execute(f'LISTEN "{channel}"')
                    for channel in self._on_demand:
                        if not self._wanted[channel]:  # a lost connection may have said so
                            await self._say(conn, channel, False)
                    await self._listen_as_wanted(conn)
                    self.listening.set()
                    self._wake_all()  # anything sent while it was down: everyone looks again
                    while True:
                        await self._take_notes(conn)
                        await self._listen_as_wanted(conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: listen again when it is back
                log.warning("listen_lost", extra={"error": str(exc)})
            self.listening.clear()
            for heard in self._heard.values():
                heard.clear()
            await asyncio.sleep(RETRY_SECONDS)

    async def _listen_as_wanted(self, conn: Any) -> None:
        """LISTEN to the on-demand channels somebody wants; UNLISTEN those nobody has wanted
        for LINGER_SECONDS."""
        self._wants_changed.clear()
        again, self._announcing_again = self._announcing_again, False
        for channel in self._on_demand:
            heard = self._heard_event(channel)
            if self._wanted[channel] > 0:
                self._unwanted_since.pop(channel, None)
                if not heard.is_set():
                    await conn.execute(f'LISTEN "{channel}"')
                    await self._say(conn, channel, True)
                    heard.set()
                    continue
            elif heard.is_set() and self._lingered(channel):
                heard.clear()  # (first: a waiter from now on waits for the LISTEN again)
                await self._say(conn, channel, False)
                await conn.execute(f'UNLISTEN "{channel}"')
                continue
            if again and heard.is_set():
                await self._say(conn, channel, True)

    async def _say(self, conn: Any, channel: str, listened: bool) -> None:
        if self._announce is not None:
            await self._announce(conn, channel, listened)

    def _lingered(self, channel: str) -> bool:
        since = self._unwanted_since.get(channel)
        return since is None or time.monotonic() - since >= LINGER_SECONDS

    async def _take_notes(self, conn: Any) -> None:
        """Deliver notifications until what is wanted changes, or a lingering channel is due
        to be let go. (A notification arriving meanwhile waits in the connection's backlog.)"""
        reading = asyncio.ensure_future(self._deliver_all(conn))
        changed = asyncio.ensure_future(self._wants_changed.wait())
        due = [
            LINGER_SECONDS - (time.monotonic() - since)
            for channel, since in self._unwanted_since.items()
            if self._heard_event(channel).is_set()
        ]
        try:
            await asyncio.wait(
                {reading, changed},
                timeout=max(0.0, min(due)) if due else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            changed.cancel()
            if not reading.done():
                reading.cancel()
                # (`wait`, not `await reading`: the reader's CancelledError is not ours, and
                # a cancel of this task meanwhile must still stop it)
                await asyncio.wait({reading})
        if reading.done() and not reading.cancelled():
            reading.result()  # the connection failed: raise, and reconnect

    async def _deliver_all(self, conn: Any) -> None:
        async for note in conn.notifies():
            self._deliver(note.channel, note.payload)

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
