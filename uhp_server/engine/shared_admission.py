"""Admission control over every replica of one PostgreSQL database: UHP_MAX_CONCURRENT_TURNS
counts the turns holding a slot on any replica whose lease is live, and the line's order is
the order turns arrived (`admission_at`, written when the task was accepted), whichever
replica they wait on (engine/admission.py is the same contract for one process).

A turn joins the line by marking its response row `waiting`, or `admitted` at once when a
slot is free and nobody waits. A turn that gives its slot back hands it to the first in line
in the same transaction and names it on a notification channel, so a waiter is woken once,
already admitted (storage/replicas.py; every change under one transaction lock, so two
replicas never both take the last slot). Waiters also look every POLL_SECONDS: for a slot
handed to them whose notification was lost, and for the slots of a replica that died,
which come back when its lease expires.
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
        self._leaving: set[asyncio.Task[None]] = set()
        self._handed: dict[str, asyncio.Event] = {}  # a waiting turn's: set when admitted
        notes.on(replica_store.ADMISSION_CHANNEL, self._slot_handed)

    def _slot_handed(self, response_id: str) -> None:
        handed = self._handed.get(response_id)
        if handed is not None:
            handed.set()

    async def acquire(self, holder: str) -> None:
        """Wait for a slot, in the line's order. Cancelling the wait leaves the line (and
        gives back a slot taken in the same instant)."""
        handed = self._handed[holder] = asyncio.Event()
        try:
            taken = await self.db.write_apart(
                replica_store.join_line, self.db, holder, self.limit, self.lease_seconds
            )
            while not taken:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(handed.wait(), POLL_SECONDS)
                taken = handed.is_set() or await self.db.write_apart(
                    replica_store.take_slot, self.db, holder, self.limit, self.lease_seconds
                )
        except asyncio.CancelledError:
            self.release(holder)
            raise
        finally:
            del self._handed[holder]

    def release(self, holder: str) -> None:
        """Give the slot back; the first in line, on any replica, takes it."""
        leaving = asyncio.get_running_loop().create_task(
            self.db.write_apart(
                replica_store.leave_line, self.db, holder, self.limit, self.lease_seconds
            )
        )
        self._leaving.add(leaving)
        leaving.add_done_callback(self._leaving.discard)
