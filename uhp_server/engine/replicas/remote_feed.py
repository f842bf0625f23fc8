"""The harness events feed's view of turns running on other replicas (docs/scale-out.md §3).

Every commit of events NOTIFYs `uhp_events` with its response id while some replica hears them
(migrations 0003 and 0008); this one does while its feed has subscribers. Then a notification
for a response it does not run is followed by reading that response's events after the last one
passed on, and the feed gets them as `LocalRuns` hands it a local run's. Best effort like the
feed itself: a response first noticed mid-turn is passed on from its first event, and a
notification lost while the listener reconnects delays its events until the response's next
commit.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass

from storage import responses as response_store
from storage.db import EVENTS_CHANNEL, Database
from storage.tables import ResponseRow, SessionRow
from storage.unit import Tx
from uhp_server.engine.reading.feed import HarnessFeed, feed_event
from uhp_server.engine.reading.fold import TERMINAL_TYPES
from uhp_server.engine.replicas.notifications import Notifications
from uhp_server.engine.replicas.peers import LocalRuns

log = logging.getLogger("uhp_server.remote_feed")


OVER_KEPT = 4096


@dataclass(frozen=True)
class _Turn:
    principal_id: str
    session_id: str
    harness_id: str
    new_session: bool
    finished_at: float | None  # when it was read first: ended already


class RemoteFeed:
    def __init__(
        self, db: Database, runs: LocalRuns, feed: HarnessFeed, notes: Notifications
    ) -> None:
        self.db = db
        self.runs = runs
        self.feed = feed
        self._notes = notes
        self._listening = False  # wants EVENTS_CHANNEL: the feed has subscribers
        feed.subscribers_changed = self._subscribers_changed
        self._subscribers_changed(feed.subscriber_count)
        notes.on(EVENTS_CHANNEL, self.notified)
        self._positions: dict[str, int] = {}  # by response id: the last event passed on
        self._turns: dict[str, _Turn] = {}
        self._reading: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()  # notified while being read: read once more
        # Responses passed on to their end, or ended before anyone watched: a late
        # notification of theirs is not a new turn (newest last; bounded).
        self._over: dict[str, None] = {}

    def _subscribers_changed(self, count: int) -> None:
        """Commits of events are heard only while somebody here watches the feed."""
        if count > 0 and not self._listening:
            self._notes.add_want(EVENTS_CHANNEL)
        elif count == 0 and self._listening:
            self._notes.drop_want(EVENTS_CHANNEL)
        self._listening = count > 0

    def notified(self, response_id: str) -> None:
        """A commit of `response_id`'s events, on any replica."""
        if not response_id or self.feed.subscriber_count == 0:
            return
        if self.runs.get(response_id) is not None:  # runs here: LocalRuns passes it on
            return
        if response_id in self._over:
            return
        reading = self._reading.get(response_id)
        # A read that has ended but whose done callback has not run yet will not read again:
        # a notification heard in between (its turn's last commit, often) starts a new one.
        if reading is not None and not reading.done():
            self._again.add(response_id)
            return
        task = asyncio.create_task(self._catch_up(response_id))
        self._reading[response_id] = task
        task.add_done_callback(functools.partial(self._read, response_id))

    def _read(self, response_id: str, task: asyncio.Task[None]) -> None:
        if self._reading.get(response_id) is task:  # not a later read of the same response
            del self._reading[response_id]

    async def _catch_up(self, response_id: str) -> None:
        try:
            while True:
                self._again.discard(response_id)
                await self._pass_on(response_id)
                if response_id not in self._again:
                    return
        except Exception:
            log.exception("remote_feed_read_failed", extra={"response_id": response_id})

    async def _pass_on(self, response_id: str) -> None:
        turn = self._turns.get(response_id) or await self.db.read(self._turn, response_id)
        if turn is None:
            return
        if turn.finished_at is not None and response_id not in self._positions:
            since = self.feed.watching_since()
            if since is None or turn.finished_at < since:  # over before anyone watched
                self._end(response_id)
                return
        self._turns[response_id] = turn
        after = self._positions.get(response_id, -1)
        events = await self.db.read(response_store.events_after, response_id, after)
        for event in events:
            self._positions[response_id] = event["sequence_number"]
            for item in feed_event(
                event,
                response_id=response_id,
                session_id=turn.session_id,
                harness_id=turn.harness_id,
                new_session=turn.new_session,
            ):
                self.feed.publish(turn.principal_id, turn.harness_id, item)
            if event["type"] in TERMINAL_TYPES:
                self._end(response_id)
                return

    def _end(self, response_id: str) -> None:
        self._positions.pop(response_id, None)
        self._turns.pop(response_id, None)
        self._over[response_id] = None
        while len(self._over) > OVER_KEPT:
            del self._over[next(iter(self._over))]

    @staticmethod
    def _turn(tx: Tx, response_id: str) -> _Turn | None:
        row = tx.orm.get(ResponseRow, response_id)
        session = tx.orm.get(SessionRow, row.session_id) if row is not None else None
        if row is None or session is None:
            return None
        return _Turn(
            row.principal_id,
            row.session_id,
            session.harness_id,
            row.previous_response_id is None,
            row.finished_at if row.status != "in_progress" else None,
        )
