"""Admission control over every replica of one PostgreSQL database: UHP_MAX_CONCURRENT_TURNS
counts the slots held on every replica whose lease is live, and the line's order is the order
turns arrived (`admission_at`, written when the task was accepted), whichever replica they
wait on (engine/turns/admission.py is the same contract for one process).

Slots are held two ways (storage/replicas.py keeps both in the count):

- **A block per replica** (`replica.slots`). While nobody waits in the shared line, a replica
  keeps the slots its turns gave back and admits its next turns from them in memory, without
  a transaction each; it grows its block by a slot when it needs one and fewer than the limit
  are held. When every slot held is its own, its turns wait for one here, in arrival order.
- **The shared line** (the response's `admission`: `waiting`, then `admitted`). A turn joins it
  as soon as a slot is held elsewhere or somebody already waits, and says so on a notification
  channel (DEMAND): every replica then gives the idle slots of its block to the line and moves
  its own waiting turns into it, in their order, so that the line holds every waiter. Until the
  line is empty again, freed slots go to it: the first in line, on any replica, is admitted in
  the transaction that freed the slot and woken by name, already admitted.

Every change happens under one transaction lock, so two replicas never both take the last
slot. Waiters also look every POLL_SECONDS, telling DEMAND again: for a slot handed to them
whose notification was lost, and for the slots of a replica that died, which stop counting
when its lease expires. A replica with idle slots or waiting turns also looks for waiters in
each lease round (its listener may be down). A lease that lapsed comes back with an empty
block (`lease_lapsed`; the cluster gives up the turns that ran on it), and while the renewal
is overdue nothing is admitted from the block.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from storage import replicas as replica_store
from storage.db import Database, Order
from storage.unit import Tx, repeatable
from uhp_server.engine.replicas.lease import Lease
from uhp_server.engine.replicas.notifications import Notifications

log = logging.getLogger("uhp_server.admission")

POLL_SECONDS = 1.0
# A turn waiting this long in its replica's own queue is marked queued for the others to read.
OWN_QUEUE_MARK_SECONDS = 0.1


class SharedAdmission:
    def __init__(
        self,
        db: Database,
        replica_id: str,
        limit: int,
        lease: Lease,
        notes: Notifications,
    ) -> None:
        if limit < 1:
            raise ValueError("the turn limit must be at least 1")
        self.db = db
        self.replica_id = replica_id
        self.limit = limit
        # Its renewals are the cluster's (engine/replicas/cluster.py). While it is not known live,
        # the others may not count this replica's block, and nothing is admitted from it in memory.
        self.lease = lease
        self.lease_seconds = lease.seconds
        self.block = 0  # slots this replica holds as its block (replica.slots)
        self._on_block: set[str] = set()  # turns running on a slot of the block
        self._here: collections.deque[tuple[str, asyncio.Future[bool]]] = collections.deque()
        self._contended = False  # somebody waits in the shared line: freed slots go to it
        self._demands = 0  # DEMANDs heard: a count, to tell one that came in meanwhile
        self._background: set[asyncio.Task[Any]] = set()
        self._handed: dict[str, asyncio.Event] = {}  # a waiting turn's: set when admitted
        # Turns of this replica's own queue: the marks still to write, and those written.
        self._marks: dict[str, asyncio.TimerHandle] = {}
        self._marked: set[str] = set()
        # One turn at a time asks for a slot of the block, the others queue behind it: turns
        # reach this replica's own queue in the order they came.
        self._taking = asyncio.Lock()
        self._looking = 0  # turns holding or queued for `_taking`
        # Lapsed leases (each came back with an empty block): counted on the admission line's
        # thread, in order with the block's changes, and as the event loop has handled them.
        # A slot granted before a lapse the loop handles after it is not the block's.
        self._lapses_written = 0
        self._lapses_handled = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        notes.on(replica_store.ADMISSION_CHANNEL, self._notified)

    # -- a turn's slot ---------------------------------------------------------------------
    async def acquire(self, holder: str, principal: str = "") -> None:
        """Wait for a slot, in the line's order (whoever's turn it is: see docs/scale-out.md).
        Cancelling the wait leaves the line (and gives back a slot taken in the same
        instant)."""
        self._loop = asyncio.get_running_loop()
        if not self._contended and await self._from_block(holder):
            return
        await self._from_line(holder)

    def release(self, holder: str) -> None:
        """Give the slot back: to the line when somebody waits in it, else to the block."""
        if holder in self._on_block:
            self._on_block.discard(holder)
            self._block_slot_freed()
        else:
            self._in_background(self._leave_line(holder))

    def position(self, holder: str) -> int | None:
        """A turn's place in this replica's own queue; None in the shared line (its place
        there is the database's, read by nobody yet) or when it does not wait."""
        for place, (waiting, _) in enumerate(self._here, start=1):
            if waiting == holder:
                return place
        return None

    def lease_lapsed(self) -> None:
        """On the admission line's thread, in order with the block's changes: a renewal found
        the lease lapsed and emptied the block (the other replicas did not count it; the
        cluster gives up the turns that ran on it). The block is forgotten here too."""
        self._lapses_written += 1
        if self._loop is None:  # nothing was ever admitted: no block to forget
            self._lapses_handled = self._lapses_written
        else:
            self._loop.call_soon_threadsafe(self._forget_block, self._lapses_written)

    def _forget_block(self, lapses: int) -> None:
        self._lapses_handled = lapses
        self.block = 0
        self._on_block.clear()
        self._send_waiters_to_line()

    async def look_at_line(self) -> None:
        """In each lease round, while the block holds idle slots or turns wait here: whether
        somebody waits in the line, in case every DEMAND was missed (the listener down)."""
        idle_or_waiting = self.block > len(self._on_block) or bool(self._here)
        if idle_or_waiting and await self.db.read(replica_store.anyone_waiting, self.lease_seconds):
            self._demanded()

    # -- the block -------------------------------------------------------------------------
    async def _from_block(self, holder: str) -> bool:
        """A slot of the block, waiting for one here when every slot held is the block's;
        False when the turn must join the shared line instead."""
        if not self.lease.current():
            return False
        if self._looking == 0 and self._idle_slot_for(holder):
            return True  # (while a turn that came earlier asks, it goes first)
        self._looking += 1
        try:
            async with self._taking:
                if self._contended or not self.lease.current():
                    return False
                if self._idle_slot_for(holder):
                    return True
                if not self._holds_every_slot:
                    found = await self._take_block_slot(holder)
                    if found is not None:
                        return found
                    if self._idle_slot_for(holder):  # freed while the answer came back
                        return True
                waiting = self._wait_here(holder)
        finally:
            self._looking -= 1
        return await waiting

    async def _take_block_slot(self, holder: str) -> bool | None:
        """Ask for a slot of the block: True when taken, False when the turn must join the
        line, None when it waits here."""
        taking = asyncio.ensure_future(
            self.db.write(self._take_on_the_line_thread, order=Order.LINE)
        )
        try:
            found = self._still_granted(await asyncio.shield(taking))
        except asyncio.CancelledError:
            taking.add_done_callback(self._slot_of_a_turn_gone)
            raise
        if found == replica_store.GRANTED:
            self.block += 1
            self._on_block.add(holder)
            return True
        if found == replica_store.WAIT_HERE and not self._contended:
            return None
        return False

    @repeatable()  # as take_block_slot is
    def _take_on_the_line_thread(self, tx: Tx) -> tuple[str, int]:
        """take_block_slot, and how many lapses were written before it (same thread)."""
        found = replica_store.take_block_slot(tx, self.replica_id, self.limit, self.lease_seconds)
        return found, self._lapses_written

    def _still_granted(self, answer: tuple[str, int]) -> str:
        """What take_block_slot found, unless a lapse emptied the block after it granted the
        slot (the slot is gone: the turn joins the line)."""
        found, lapses = answer
        if found == replica_store.GRANTED and lapses != self._lapses_handled:
            return replica_store.IN_LINE
        return found

    def _idle_slot_for(self, holder: str) -> bool:
        if self._here or len(self._on_block) >= self.block:
            return False
        self._on_block.add(holder)
        return True

    @property
    def _holds_every_slot(self) -> bool:
        """The block is the whole limit: nobody else holds a slot, nor can take one while it
        does, so a turn waits here without asking the database."""
        return self.block >= self.limit

    def _wait_here(self, holder: str) -> Awaitable[bool]:
        """Take the turn's place in this replica's own queue now; the wait for a slot of the
        block, False when somebody began to wait in the shared line meanwhile (the turn moves
        there, in its place)."""
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._here.append((holder, waiter))
        self._marks[holder] = asyncio.get_running_loop().call_later(
            OWN_QUEUE_MARK_SECONDS, self._mark_in_own_queue, holder
        )
        return self._wait_for_block_slot(holder, waiter)

    async def _wait_for_block_slot(self, holder: str, waiter: asyncio.Future[bool]) -> bool:
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.result():
                self.release(holder)  # handed a slot in the same instant: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._here.remove((holder, waiter))
                self._out_of_own_queue(holder)
            raise

    def _block_slot_freed(self) -> None:
        """A slot of the block is free: to the shared line when somebody waits there, else to
        the first turn waiting here, else it stays in the block, idle."""
        if self._contended:
            self._give_back(1)
            return
        if not self.lease.current():  # nothing is admitted from the block meanwhile
            self._send_waiters_to_line()
            return
        while self._here:
            holder, waiter = self._here.popleft()
            if not waiter.done():
                self._on_block.add(holder)
                waiter.set_result(True)
                self._out_of_own_queue(holder)
                return

    # -- what the other replicas read of a turn in this replica's own queue -----------------
    def waiting_before_line(self, holder: str) -> None:
        """The turn waits in this replica's fair line (engine/replicas/fair_admission.py),
        before it asks here: marked like a turn in the own queue, once it waited that long."""
        self._out_of_own_queue(holder)
        self._marks[holder] = asyncio.get_running_loop().call_later(
            OWN_QUEUE_MARK_SECONDS, self._mark_in_own_queue, holder
        )

    def done_waiting_before_line(self, holder: str) -> None:
        """Out of the fair line (it asks here now, or it is gone): its mark taken back."""
        self._out_of_own_queue(holder)

    def _mark_in_own_queue(self, holder: str) -> None:
        """The turn has waited OWN_QUEUE_MARK_SECONDS here: its row says so, written behind
        the block's changes on the admission line's thread (a shorter wait costs nothing)."""
        if self._marks.pop(holder, None) is None:
            return  # (out of the queue already)
        self._marked.add(holder)
        self._in_background(self._write_mark(holder, True))

    def _out_of_own_queue(self, holder: str, *, to_line: bool = False) -> None:
        """The turn left this replica's queue: its mark is not written, or is taken back
        (unless it joins the shared line, which writes over the mark)."""
        pending = self._marks.pop(holder, None)
        if pending is not None:
            pending.cancel()
        if holder in self._marked:
            self._marked.discard(holder)
            if not to_line:
                self._in_background(self._write_mark(holder, False))

    async def _write_mark(self, holder: str, waiting: bool) -> None:
        # Taking a mark back is repeated (it changes only a mark: admission = 'own_queue'),
        # else a running turn would read as queued elsewhere; a mark itself is tried once
        # (a late repeat could mark a turn already out of the queue).
        for pause in (0.2, 1.0, 5.0, None) if not waiting else (None,):
            try:
                await self.db.write(
                    replica_store.mark_in_own_queue, holder, waiting, order=Order.LINE
                )
                return
            except Exception:  # only what other replicas show: not the turn's slot
                log.warning("own_queue_mark_failed", exc_info=True, extra={"response_id": holder})
            if pause is not None:
                await asyncio.sleep(pause)

    def _slot_of_a_turn_gone(self, taking: asyncio.Future[tuple[str, int]]) -> None:
        """A block grew for a turn cancelled meanwhile: its slot is free at once."""
        granted = (
            not taking.cancelled()
            and taking.exception() is None
            and self._still_granted(taking.result()) == replica_store.GRANTED
        )
        if granted:
            self.block += 1
            self._block_slot_freed()

    def _give_back(self, count: int) -> None:
        self.block -= count
        self._in_background(self._give_back_to_line(count, self._lapses_written))

    async def _give_back_to_line(self, count: int, lapses: int) -> None:
        landed = await self._free_to_line(
            replica_store.give_back_block_slots, self.replica_id, count
        )
        if not landed and lapses == self._lapses_written:  # (unless a lapse emptied the block)
            self.block += count  # still held: idle in the block, given back at the next demand

    # -- the shared line -------------------------------------------------------------------
    async def _from_line(self, holder: str) -> None:
        self._contended = True
        handed = self._handed[holder] = asyncio.Event()
        try:
            taken = await self.db.write(
                replica_store.join_line, holder, self.limit, self.lease_seconds, order=Order.LINE
            )
            while not taken:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(handed.wait(), POLL_SECONDS)
                taken = handed.is_set() or await self.db.write(
                    replica_store.take_slot,
                    holder,
                    self.limit,
                    self.lease_seconds,
                    order=Order.LINE,
                )
        except asyncio.CancelledError:
            self.release(holder)
            raise
        finally:
            del self._handed[holder]

    async def _leave_line(self, holder: str) -> None:
        # (failed: the slot comes back with the lease round's look for lost ones)
        await self._free_to_line(replica_store.leave_line, holder)

    async def _free_to_line(self, free: Callable[..., int], *args: Any) -> bool:
        """Free slots (`free`: leave_line or give_back_block_slots, with `args`), handing them
        to the line; False when nothing of it landed. (A give-back whose outcome stayed
        unknown outlived the lease, whose renewal empties the block: its slots are gone.)"""
        demands = self._demands
        arguments: tuple[Any, ...] = (*args, self.limit, self.lease_seconds)
        try:
            waiting = await self.db.write(free, *arguments, order=Order.LINE)
        except Exception as exc:
            log.exception("admission_release_failed", extra={"statement": free.__name__})
            return isinstance(exc, replica_store.OutcomeUnknown)
        self._line_looked_at(waiting, demands)
        return True

    def _line_looked_at(self, waiting: int, demands: int) -> None:
        """Slots go back to blocks once the line is empty, unless a turn said it waits since
        the look (its DEMAND may have come before the look's answer)."""
        if waiting == 0 and demands == self._demands:
            self._contended = False

    def _notified(self, payload: str) -> None:
        """ADMISSION_CHANNEL: a slot handed to a turn waiting here (its response id), or
        DEMAND. ("" says the listener reconnected: waiters look again on their own, and tell
        DEMAND again while they wait.)"""
        handed = self._handed.get(payload)
        if handed is not None:
            handed.set()
        elif payload == replica_store.DEMAND:
            self._demanded()

    def _demanded(self) -> None:
        """Somebody waits in the shared line: the block's idle slots go to it, and the turns
        waiting here join it in their order."""
        self._contended = True
        self._demands += 1
        idle = self.block - len(self._on_block)
        if idle > 0:
            self._give_back(idle)
        self._send_waiters_to_line()

    def _send_waiters_to_line(self) -> None:
        while self._here:
            holder, waiter = self._here.popleft()
            self._out_of_own_queue(holder, to_line=not waiter.done())
            if not waiter.done():
                waiter.set_result(False)

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
