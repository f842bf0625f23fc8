"""Admission control over every replica of one PostgreSQL database: UHP_MAX_CONCURRENT_TURNS
counts the turns holding a slot on any replica whose lease is live, and the line's order is
the order turns joined it, whichever replica they wait on (engine/admission.py is the same
contract for one process).

A turn joins the line by marking its response row `waiting`, and takes a slot by a
conditional UPDATE to `admitted` (storage/replicas.py: `take_slot`, under a transaction lock
so two replicas never both take the last slot). A slot given back is announced on a
notification channel, and every waiter looks again; waiters also look every POLL_SECONDS, so
the slots of a replica that died come back when its lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib

from storage import replicas as replica_store
from storage.db import Database
from uhp_server.engine.notifications import Notifications

POLL_SECONDS = 1.0


class SharedAdmission:
    def __init__(
        self, db: Database, limit: int, lease_seconds: float, notes: Notifications
    ) -> None:
        if limit < 1:
            raise ValueError("the turn limit must be at least 1")
        self.db = db
        self.limit = limit
        self.lease_seconds = lease_seconds
        self._freed = asyncio.Event()
        self._leaving: set[asyncio.Task[None]] = set()
        notes.on(replica_store.ADMISSION_CHANNEL, self._slot_freed)

    def _slot_freed(self, _response_id: str) -> None:
        freed, self._freed = self._freed, asyncio.Event()
        freed.set()

    async def acquire(self, holder: str) -> None:
        """Wait for a slot, in the line's order. Cancelling the wait leaves the line (and
        gives back a slot taken in the same instant)."""
        try:
            await self.db.write(replica_store.join_line, self.db, holder)
            while True:
                freed = self._freed
                taken = await self.db.write(
                    replica_store.take_slot, self.db, holder, self.limit, self.lease_seconds
                )
                if taken:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(freed.wait(), POLL_SECONDS)
        except asyncio.CancelledError:
            self.release(holder)
            raise

    def release(self, holder: str) -> None:
        """Give the slot back; the first in line, on any replica, takes it."""
        leaving = asyncio.get_running_loop().create_task(
            self.db.write(replica_store.leave_line, self.db, holder)
        )
        self._leaving.add(leaving)
        leaving.add_done_callback(self._leaving.discard)
