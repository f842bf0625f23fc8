"""Several replicas on one PostgreSQL database behave as one server (docs/scale-out.md §3).

- **Leases.** Each replica renews its row in `replica` every third of
  UHP_REPLICA_LEASE_SECONDS and records itself on the responses it runs. At start, and then
  on every renewal, it finishes the turns no live replica runs (`failed`, partial output
  kept, as start-up recovery does): those of replicas whose lease expired, and at start its
  own from a former life. A conditional UPDATE decides which replica finishes each one; the
  replica that deletes an expired lease reaps that replica's containers.
- **Events.** A response running on another replica is followed by tailing the event table
  from the last sequence number seen, woken by the NOTIFY of the writer's commit.
- **Answers.** A question a turn here waits on is shown to every replica; answers another
  replica takes are relayed to the live turn (engine/replicas/answer_relay.py).
- **Feed.** The harness events feed also shows the turns of the other replicas, read as
  their commits are notified (engine/replicas/remote_feed.py).
- **Cancel.** A cancel for a response running elsewhere is recorded on its row and notified;
  the owner stops the turn as it would a local cancel, and the asking replica awaits the
  terminal event through the tail.
- **Letting go.** A replica whose lease lapsed stops the turns it may no longer own: those
  another replica took over (seen at its next renewal, e.g. after a stalled process), and all
  of them once it has failed to renew for longer than a lease (cut off from the database).
  Their processes stop; nothing more of them is stored. One that nobody took over meanwhile
  (the whole database was out of reach) is ended `failed` by this replica once it renews.

SQLite keeps none of this: one process, and the in-memory paths alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from storage import relayed_questions
from storage import replicas as replica_store
from storage import responses as response_store
from storage import sessions as session_store
from storage.db import EVENTS_CHANNEL, Database, Order
from storage.tables import ResponseRow
from storage.unit import Tx
from uhp_server.engine.reading.fold import TERMINAL_TYPES
from uhp_server.engine.replicas.answer_relay import AnswerRelay
from uhp_server.engine.replicas.lease import Lease
from uhp_server.engine.replicas.notifications import Notifications
from uhp_server.engine.replicas.peers import LocalRuns
from uhp_server.engine.replicas.remote_feed import RemoteFeed
from uhp_server.engine.replicas.shared_admission import SharedAdmission
from uhp_server.engine.requests import ToolAnswer
from uhp_server.engine.turns.recovery import finish_interrupted
from uhp_server.engine.turns.run import REPLICA_STOPPED
from uhp_server.sandbox.base import Sandbox

log = logging.getLogger("uhp_server.cluster")

# How long a cancel relayed to another replica waits for its terminal event: the owner
# answers within LocalRuns's two CANCEL_TURN_WAITs, plus a notification each way.
RELAY_WAIT_SECONDS = 2.0
FINISH_ATTEMPTS = 3
# How long a request to park a turn waits for its runner to take it, and then for the turn's
# end (its artifacts collected): together within a door's request (engine/tasks/steering.py).
PARK_HEARD_SECONDS = 10.0
PARK_ENDING_SECONDS = 15.0
# A finished turn still holding an admission slot this long after its end lost its release.
LOST_SLOT_SECONDS = 120.0
# Renewals sent and not yet back, at most (a hung link must not pile them up).
RENEWALS_IN_FLIGHT = 2
# A session held by a turn that ended this long ago lost its release.
ENDED_TURN_GRACE_SECONDS = 5.0
# A tail looks at the table this often even without a notification.
POLL_SECONDS = 1.0

LOST_REPLICA = {
    "type": "harness_error",
    "code": "harness_error",
    "message": REPLICA_STOPPED,
    "param": None,
    "detail": None,
}


def listener(db: Database, replica_id: str) -> Notifications:
    """The one LISTEN connection of this replica, for the cluster and its admission line."""
    return Notifications(
        db.dialect.conninfo or "",
        (
            replica_store.CANCEL_CHANNEL,
            replica_store.ADMISSION_CHANNEL,
            relayed_questions.ANSWERS_CHANNEL,
        ),
        on_demand=(EVENTS_CHANNEL,),  # while a tail or the feed here wants them
        announce=functools.partial(_announce_hearing, replica_id),
    )


async def _announce_hearing(replica_id: str, conn: Any, channel: str, hearing: bool) -> None:
    """Commits of events are told only while some replica hears them (migration 0008)."""
    if channel == EVENTS_CHANNEL:
        await replica_store.hear_events(conn, replica_id, hearing)


class Cluster:
    """The other replicas, as this one's `Peers` (engine/replicas/peers.py)."""

    def __init__(
        self,
        db: Database,
        replica_id: str,
        lease: Lease,
        sandbox: Sandbox,
        notes: Notifications,
        admission: SharedAdmission,
    ) -> None:
        self.db = db
        self.replica_id = replica_id
        self.lease = lease
        self.lease_seconds = lease.seconds
        self.sandbox = sandbox
        self.notes = notes
        self.admission = admission  # told when the lease lapsed, and at each lease round
        self.answers = AnswerRelay(db, replica_id)
        self._runs: LocalRuns | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._cancelling: set[asyncio.Task[None]] = set()
        self._renewals: set[asyncio.Task[None]] = set()  # sent, not yet back
        self._looking_around = asyncio.Lock()  # one round of the renewal's other work at once
        self._given_up: dict[str, str] = {}  # turns let go while cut off: response → session
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -----------------------------------------------------------------------
    async def open(self, runs: LocalRuns) -> None:
        """Take the lease, finish what no live replica runs (this one's former turns too),
        then listen and keep the lease."""
        self._runs = runs
        self._loop = asyncio.get_running_loop()
        await self._wait_for_own_lease()
        await self.db.write(self._renew_lease, order=Order.LINE)
        await self._sweep(own=True)
        await self.db.write(replica_store.clear_slots, self.replica_id)
        self.notes.on(replica_store.CANCEL_CHANNEL, self._cancel_requested)
        self.answers.runs = runs
        self.notes.on(relayed_questions.ANSWERS_CHANNEL, self.answers.notified)
        self.remote_feed = RemoteFeed(self.db, runs, runs.feed, self.notes)
        await self.notes.open()
        self._loop_task = asyncio.create_task(self._keep_lease(), name="replica lease")

    async def _wait_for_own_lease(self) -> None:
        """A live lease of this id is this replica's former life, killed a moment ago (its
        turns are finished once it expires), or another process of the same id: then this
        one must not start, or it would fail that one's turns."""
        waited = 0.0
        while await self.db.read(replica_store.lease_live, self.replica_id, self.lease_seconds):
            if waited > self.lease_seconds * 2:
                raise RuntimeError(
                    f"another running server holds the replica id {self.replica_id!r}: give"
                    " each replica sharing a data folder its own UHP_REPLICA_ID"
                )
            if waited == 0:
                log.warning("replica_lease_held", extra={"replica": self.replica_id})
            await asyncio.sleep(0.5)
            waited += 0.5

    async def close(self) -> None:
        """After the turns were stopped: give the lease up (nothing of this replica is left)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        for renewal in list(self._renewals):
            renewal.cancel()
        await asyncio.gather(*self._renewals, return_exceptions=True)
        await self.notes.close()
        with contextlib.suppress(Exception):  # on the renewals' line: after any still on it
            await self.db.write(replica_store.drop_lease, self.replica_id, order=Order.LINE)

    async def _keep_lease(self) -> None:
        """Every third of a lease: judge the lease by the last renewal that reached the
        database, and send the next one without waiting for the last to come back (a slow
        or hung one must neither space them out nor hide a lapse)."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            if not self.lease.current():
                self._give_up_turns()
            if len(self._renewals) < RENEWALS_IN_FLIGHT:
                renewal = asyncio.create_task(self._renewal_round())
                self._renewals.add(renewal)
                renewal.add_done_callback(self._renewals.discard)

    def _renew_lease(self, tx: Tx) -> None:
        """On the admission line's thread: renew, and once it committed, record when this
        renewal set out (the lease runs from no later than that), whatever the event loop is
        doing meanwhile."""
        setting_out = time.monotonic()
        lapsed = replica_store.renew_lease(tx, self.replica_id, self.lease_seconds)
        tx.after_commit(lambda: self._renewed_lease(setting_out, lapsed))

    def _renewed_lease(self, setting_out: float, lapsed: bool) -> None:
        self.lease.renewed(setting_out)
        if lapsed:
            # The other replicas stopped counting what this one holds, and may have taken its
            # turns over: its turns stop, as when its own clock finds the lease lapsed.
            self.admission.lease_lapsed()
            if self._loop is not None and self._runs is not None:
                self._loop.call_soon_threadsafe(self._give_up_turns)
                # Its row may have been made anew, hearing no events: say so again.
                self._loop.call_soon_threadsafe(self.notes.announce_again)

    async def _renewal_round(self) -> None:
        try:
            await self.db.write(self._renew_lease, order=Order.LINE)
        except Exception:
            log.exception("replica_lease_renewal_failed")
            return
        if self._looking_around.locked():
            return  # the last round still runs
        async with self._looking_around:
            try:
                await self._release_sessions_of_ended_turns()
                await self._let_go_of_turns_taken_over()
                await self._finish_given_up()
                await self._sweep(own=False)
                await self._look_for_cancels()  # a notification may have been lost
                await self.answers.look_for_answers()
                await self.db.write(relayed_questions.forget_finished)
                await self.db.write(
                    replica_store.clear_slots, self.replica_id, time.time() - LOST_SLOT_SECONDS
                )
                await self._stop_storing_deleted()
                await self.admission.look_at_line()
            except Exception:
                log.exception("replica_lease_round_failed")

    async def _release_sessions_of_ended_turns(self) -> None:
        """A session still held by a turn that ended a while ago lost its release (a failure
        between a turn's end and its session's release, on any replica): free it."""
        before = time.time() - ENDED_TURN_GRACE_SECONDS
        for session_id in await self.db.write(session_store.release_ended, before, order=Order.ANY):
            log.warning("session_release_repaired", extra={"session_id": session_id})

    # -- letting go of turns this replica may no longer own ---------------------------------
    def _give_up_turns(self) -> None:
        """The lease lapsed without a renewal: other replicas take this one's turns over, and a
        session of theirs may start its next turn elsewhere, so no process of them may go on
        writing to its workspace here."""
        assert self._runs is not None
        for run in self._runs.running():
            if not run.abandoned:
                log.warning("replica_turn_given_up", extra={"response_id": run.response_id})
                self._given_up[run.response_id] = run.session_id
                self._runs.abandon(run)

    async def _let_go_of_turns_taken_over(self) -> None:
        """Turns running here that another replica claimed while this one's lease had lapsed
        (a process stalled for longer than a lease): the database already has their end."""
        runs = self._runs
        assert runs is not None
        here = [run.response_id for run in runs.running() if not run.abandoned]
        if not here:
            return
        for response_id in await self.db.read(replica_store.taken_over, here, self.replica_id):
            run = runs.get(response_id)
            if run is not None:
                log.warning("replica_turn_taken_over", extra={"response_id": response_id})
                runs.abandon(run)

    async def _finish_given_up(self) -> None:
        """End in the database the turns given up while cut off that no other replica took
        over meanwhile (this one's renewed lease keeps the others from doing it now)."""
        if not self._given_up:
            return
        orphans = [
            replica_store.Orphan(response_id, session_id, self.replica_id)
            for response_id, session_id in self._given_up.items()
        ]
        _, failed = await asyncio.to_thread(self._finish_each, orphans, True)
        self._given_up = {r: s for r, s in self._given_up.items() if r in failed}

    async def _stop_storing_deleted(self) -> None:
        """A response deleted on another replica while it runs here: the turn runs on, no
        longer stored (as a local delete does), and what it stored meanwhile is dropped."""
        runs = self._runs
        for response_id in await self.db.read(replica_store.deleted_while_running, self.replica_id):
            run = runs.get(response_id) if runs is not None else None
            if run is not None and run.log.persist:
                run.log.persist = False
                await self.db.write(response_store.delete_response, response_id)

    async def _sweep(self, *, own: bool) -> None:
        # A thread of its own: finishing appends through the writer and waits for it.
        finished = await asyncio.to_thread(self._finish_orphans, own)
        if finished:
            log.warning("replica_turns_taken_over", extra={"count": finished})
        for dead in await self.db.write(replica_store.forget_expired, self.lease_seconds):
            log.warning("replica_lease_expired", extra={"replica": dead})
            if dead != self.replica_id:
                await self.sandbox.reap_owner(dead)

    def _finish_orphans(self, own: bool) -> int:
        """End every turn no live replica runs that this one claims (blocking)."""
        orphans = self.db.run(replica_store.orphans, self.replica_id, self.lease_seconds, own)
        ended, _ = self._finish_each(orphans, False)
        return len(ended)

    def _finish_each(
        self, orphans: list[replica_store.Orphan], lost: bool
    ) -> tuple[list[str], list[str]]:
        """Claim and end each turn (blocking; `lost`: as a lost replica's, though this one's).
        The ids it ended, and those it could not end (left in progress); the rest another
        replica ended."""
        ended, failed = [], []
        for orphan in orphans:
            if not self.db.run(
                replica_store.take_over, orphan, self.replica_id, self.lease_seconds
            ):
                continue  # another replica finishes it
            try:
                status = self._finish(orphan, lost)
                self.db.run(
                    session_store.release_session,
                    orphan.session_id,
                    orphan.response_id,
                    status,
                    None,
                )
            except Exception:  # left in progress: this replica's next start ends it
                log.exception("replica_turn_unfinished", extra={"response_id": orphan.response_id})
                failed.append(orphan.response_id)
                continue
            ended.append(orphan.response_id)
        return ended, failed

    def _finish(self, orphan: replica_store.Orphan, lost: bool = False) -> str:
        """Its closing events, after the last one stored. A dead replica's write landing in
        between makes the append collide on the event's key: read again and retry (this
        replica now owns the turn, so no later sweep would)."""
        error = LOST_REPLICA if lost or orphan.replica_id != self.replica_id else None
        for attempt in range(FINISH_ATTEMPTS):
            try:
                if error is None:
                    return finish_interrupted(self.db, orphan.response_id, stop=orphan.stop)
                return finish_interrupted(self.db, orphan.response_id, error, orphan.stop)
            except Exception:
                if attempt == FINISH_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    # -- cancel between replicas ---------------------------------------------------------
    def _cancel_requested(self, response_id: str) -> None:
        """Another replica asked to stop a turn (the payload names it; "": any may have been
        missed): stop those that run here."""
        runs = self._runs
        if runs is None or (response_id and runs.get(response_id) is None):
            return
        task = asyncio.create_task(self._look_for_cancels())
        self._cancelling.add(task)
        task.add_done_callback(self._cancelling.discard)

    async def _look_for_cancels(self) -> None:
        runs = self._runs
        assert runs is not None
        for response_id, details in await self.db.read(
            replica_store.cancel_requests, self.replica_id
        ):
            run = runs.get(response_id)
            if run is None or run.log.ending or run.cut_short:
                continue
            stopping = runs.cancel(run) if details is None else runs.time_out(run, details)
            task = asyncio.create_task(stopping)
            self._cancelling.add(task)
            task.add_done_callback(self._cancelling.discard)

    async def relay_cancel(self, response_id: str, details: dict[str, Any] | None = None) -> None:
        """Ask the replica running the response to stop it (`details`: a deadline's, ending
        it `incomplete`), and wait (bounded) for the terminal event it writes."""
        if not await self.db.write(replica_store.request_cancel, response_id, details):
            return  # already over
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wait_finished(response_id), RELAY_WAIT_SECONDS)

    async def park_elsewhere(self, response_id: str, call_ids: list[str]) -> bool:
        """Ask the replica whose live turn waits on these calls to park it, and wait (bounded)
        for the turn's end; False when it no longer waits on them (nothing was asked). A
        runner that hears of it late (a notification lost: its renewals look too) has up to
        a lease to take the request; past that it is withdrawn, unless the runner took it
        meanwhile: then its turn is ending, and is waited for a while more. Both waits stay
        inside the 30 s a door's caller gives a request (Oumi's)."""
        try:
            # Shielded: once sent, the request is recorded, or known not to be, before the
            # asker may stop waiting.
            if not await asyncio.shield(self.answers.request_park(response_id, call_ids)):
                return False
            with contextlib.suppress(TimeoutError):
                hearing = min(self.lease_seconds, PARK_HEARD_SECONDS)
                await asyncio.wait_for(self.wait_finished(response_id), hearing)
                return True
        except asyncio.CancelledError:
            # The asker stopped waiting (its request went, the server stops): a request
            # nobody will carry on after must not stay behind for the runner to take.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.answers.withdraw_park_request(response_id))
            raise
        if await asyncio.shield(self.answers.withdraw_park_request(response_id)):
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wait_finished(response_id), PARK_ENDING_SECONDS)
        return True

    # -- as Peers -------------------------------------------------------------------------
    @property
    def shared(self) -> bool:
        return True

    @property
    def board(self) -> AnswerRelay:
        return self.answers

    async def relay_answers(self, response_id: str, answers: list[ToolAnswer]) -> bool:
        return await self.answers.relay(response_id, answers)

    # -- events of a response running elsewhere ------------------------------------------
    @contextlib.asynccontextmanager
    async def events_heard(self) -> AsyncIterator[None]:
        """Enters once the other replicas' commits of events are heard here (at most a
        poll's wait): subscribe a harness events feed inside, and the turns of the others
        reach it from then on. (Cancelled while it waits, nothing is left subscribed.)"""
        with self.notes.want(EVENTS_CHANNEL):
            await self.notes.heard(EVENTS_CHANNEL, POLL_SECONDS)
            yield

    async def follow(self, response_id: str, after: int = -1) -> AsyncIterator[dict[str, Any]]:
        """The response's stored events after `after`, then each one as it is committed
        (by whichever replica), until the terminal one or the response is over."""
        with self.notes.watching(EVENTS_CHANNEL, response_id):
            await self.notes.heard(EVENTS_CHANNEL, POLL_SECONDS)
            async for event in self._follow(response_id, after):
                yield event

    async def _follow(self, response_id: str, after: int) -> AsyncIterator[dict[str, Any]]:
        position = after
        while True:
            changed = self.notes.changed(EVENTS_CHANNEL, response_id)
            events = await self.db.read(response_store.events_after, response_id, position)
            for event in events:
                position = event["sequence_number"]
                yield event
                if event["type"] in TERMINAL_TYPES:
                    return
            if events:
                continue
            try:
                await asyncio.wait_for(changed.wait(), POLL_SECONDS)
            except TimeoutError:
                if not await self.db.read(self._running, response_id):
                    # Over with no terminal event after `after` (resumed past it, or never
                    # stored): one last look, then the stream ends.
                    for event in await self.db.read(
                        response_store.events_after, response_id, position
                    ):
                        yield event
                    return

    async def wait_finished(self, response_id: str) -> None:
        """Until the response's turn is over, wherever it runs (its status changes in the
        terminal event's own transaction)."""
        with self.notes.watching(EVENTS_CHANNEL, response_id):
            await self.notes.heard(EVENTS_CHANNEL, POLL_SECONDS)
            while True:
                changed = self.notes.changed(EVENTS_CHANNEL, response_id)
                if not await self.db.read(self._running, response_id):
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), POLL_SECONDS)

    @staticmethod
    def _running(tx: Tx, response_id: str) -> bool:
        row = tx.orm.get(ResponseRow, response_id)
        return row is not None and row.status == "in_progress"
