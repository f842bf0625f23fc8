"""Replicas on one PostgreSQL database: leases, turns taken over from a dead replica, cancel
requests between replicas, and the shared admission line (engine/replicas/cluster.py uses them).

Times are the database's clock (`clock_timestamp()`), so replicas on hosts whose clocks
disagree still agree on whose lease expired. Each function is one transaction; the
conditional UPDATEs are what decide between replicas racing for the same row. Leases and
the admission line's statements are written with `Order.LINE` (storage/db.py), beside the
event log's writer; the admission statements are `repeatable`.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from storage.dialect import PostgresDialect
from storage.unit import OutcomeUnknown as OutcomeUnknown
from storage.unit import Tx, repeatable

NOW = PostgresDialect.now
# Cancel requests and freed admission slots are announced on these channels, as committed
# events are on storage.db.EVENTS_CHANNEL (payload: the response id).
CANCEL_CHANNEL = "uhp_cancel"
ADMISSION_CHANNEL = "uhp_admission"
# Past a lease and this margin, a give-back of block slots still unanswered is over: the
# lease has lapsed.
LAPSE_MARGIN_SECONDS = 1.0
# One key for the admission line's transaction lock (pg_advisory_xact_lock).
_ADMISSION_LOCK = 0x75687061  # "uhpa"
# A replica starting to hear events waits at most this long for the transactions under way
# (its tails poll anyway, so a transaction held open longer only delays them): well within
# the second a tail waits for its LISTEN before its first read.
UNDER_WAY_WAIT_SECONDS = 0.5

# A response whose replica holds a live lease; `:lease` seconds, `r` the response.
_LIVE = (
    "EXISTS (SELECT 1 FROM replica l WHERE l.id = r.replica_id"
    f" AND l.heartbeat_at > {NOW} - :lease)"
)
# Turns of live replicas waiting in the shared line (`r` the response).
_WAITING = f"r.admission = 'waiting' AND {_LIVE}"
_ANYONE_WAITING = f"EXISTS (SELECT 1 FROM response r WHERE {_WAITING})"
# The slots the live replicas hold as blocks (replica.slots, engine/replicas/shared_admission.py).
_BLOCKS = f"(SELECT COALESCE(sum(l.slots), 0) FROM replica l WHERE l.heartbeat_at > {NOW} - :lease)"
# Whether this change of a block (`:op`, an id of its own) was made already: the commit of a
# first attempt whose answer was lost (the admission statements are repeatable).
_DONE_ALREADY = "EXISTS (SELECT 1 FROM replica l WHERE l.id = :me AND l.slots_op = :op)"
# What `join_line`, `take_slot` and `take_block_slot` tell ADMISSION_CHANNEL when a turn waits
# in the line: every replica gives back the idle slots of its block (never a response id).
DEMAND = "demand"


def _turns_admitted(also: str = "") -> str:
    """How many turns of live replicas hold a slot of their own (`also`: a further condition)."""
    return f"(SELECT count(*) FROM response r WHERE r.admission = 'admitted' AND {_LIVE}{also})"


# Every slot held: turns admitted one by one, and the blocks.
_ADMITTED = f"{_turns_admitted()} + {_BLOCKS}"


@dataclass(frozen=True)
class Orphan:
    response_id: str
    session_id: str
    replica_id: str | None
    cancel_requested: bool = False  # a stop was asked before its replica died: honour it
    stop_details: str | None = None  # with it: a deadline's reason (JSON), else a cancel

    @property
    def stop(self) -> dict[str, Any] | None:
        """What the stop asked for: {} a cancel, else a deadline's incomplete_details."""
        if not self.cancel_requested:
            return None
        return json.loads(self.stop_details) if self.stop_details else {}


def renew_lease(tx: Tx, replica_id: str, lease: float) -> bool:
    """Renew the lease; True when it had lapsed (or was gone: deleted as expired, or never
    taken). A lapsed lease comes back with an empty block: meanwhile the other replicas did not
    count it, and may have taken its slots. A row made anew does not hear events until its
    replica says so again (`hear_events`, on its listening connection only)."""
    rows = tx.rows(
        f"WITH before AS (SELECT heartbeat_at > {NOW} - :lease AS live FROM replica"
        "   WHERE id = :id)"
        f" INSERT INTO replica (id, heartbeat_at, started_at) VALUES (:id, {NOW}, {NOW})"
        f" ON CONFLICT (id) DO UPDATE SET heartbeat_at = {NOW},"
        f" slots = CASE WHEN replica.heartbeat_at > {NOW} - :lease THEN replica.slots ELSE 0 END"
        " RETURNING NOT COALESCE((SELECT live FROM before), FALSE)",
        {"id": replica_id, "lease": lease},
    )
    return bool(rows[0][0])


async def hear_events(conn: Any, replica_id: str, hearing: bool) -> None:
    """Say whether this replica hears `uhp_events`, on its listening connection (psycopg's
    AsyncConnection, in autocommit): after its LISTEN, before its UNLISTEN, and again after a
    lapsed lease made its row anew. Commits of events NOTIFY only while some replica hears them
    (migration 0008). A commit whose check came before the flag landed told nobody, so starting
    to hear then waits (at most UNDER_WAY_WAIT_SECONDS) for every transaction of the server
    under way at that moment to end: after it, each commit of events (under READ COMMITTED,
    where the trigger's check sees what landed before it) has either landed, for the
    replica's first read to see, or NOTIFYs. Waiting, rather than a lock, keeps one
    transaction left open from stalling every commit of events."""
    await conn.execute("UPDATE replica SET hears_events = %s WHERE id = %s", (hearing, replica_id))
    if not hearing:
        return
    # A transaction id of its own, ended: the snapshot after it lists every transaction that
    # took an id before the flag landed and is still under way (a snapshot lists only those
    # older than the newest one ended; a writer that took its id while the UPDATE waited for
    # the row, or committed, can be newer than that).
    await conn.execute("SELECT pg_current_xact_id()")
    under_way = await conn.execute(
        "SELECT array_agg(x::text) FROM pg_snapshot_xip(pg_current_snapshot()) AS x"
    )
    (xids,) = await under_way.fetchone()
    deadline = time.monotonic() + UNDER_WAY_WAIT_SECONDS
    while xids and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
        still = await conn.execute(
            "SELECT array_agg(x) FROM unnest(%s::text[]) AS x"
            " WHERE pg_xact_status(x::xid8) = 'in progress'",
            (xids,),
        )
        (xids,) = await still.fetchone()


def lease_live(tx: Tx, replica_id: str, lease: float) -> bool:
    """Whether a replica of this id holds a live lease."""
    rows = tx.rows(
        f"SELECT 1 FROM replica WHERE id = :id AND heartbeat_at > {NOW} - :lease",
        {"id": replica_id, "lease": lease},
    )
    return bool(rows)


def drop_lease(tx: Tx, replica_id: str) -> None:
    tx.execute("DELETE FROM replica WHERE id = :id", {"id": replica_id})


def orphans(tx: Tx, me: str, lease: float, own: bool) -> list[Orphan]:
    """Unfinished responses no live replica runs: their replica's lease expired; with `own`
    (at start), also this replica's from a former life and those of no replica (rows from
    before leases)."""
    mine = "r.replica_id IS NULL OR r.replica_id = :me OR" if own else ""
    rows = tx.rows(
        "SELECT r.id, r.session_id, r.replica_id, r.cancel_requested, r.stop_details"
        " FROM response r"
        f" WHERE r.status = 'in_progress' AND ({mine}"
        f" (r.replica_id <> :me AND NOT {_LIVE}))",
        {"me": me, "lease": lease},
    )
    return [Orphan(*row) for row in rows]


def take_over(tx: Tx, orphan: Orphan, me: str, lease: float) -> bool:
    """Claim an orphan for this replica to finish; False when another replica did first (or
    its owner renewed its lease since it was found)."""
    owner = "r.replica_id IS NULL" if orphan.replica_id is None else "r.replica_id = :old"
    changed = tx.execute(
        "UPDATE response r SET replica_id = :me, admission = NULL"
        f" WHERE r.id = :id AND r.status = 'in_progress' AND {owner}"
        f" AND (r.replica_id IS NULL OR r.replica_id = :me OR NOT {_LIVE})",
        {"me": me, "id": orphan.response_id, "old": orphan.replica_id, "lease": lease},
    )
    return changed == 1


def forget_expired(tx: Tx, lease: float) -> list[str]:
    """Delete the leases that expired; the ids this call deleted (each replica's containers
    are then reaped by the one replica that deleted its lease)."""
    rows = tx.rows(
        f"DELETE FROM replica WHERE heartbeat_at <= {NOW} - :lease RETURNING id", {"lease": lease}
    )
    return [row[0] for row in rows]


def taken_over(tx: Tx, response_ids: list[str], me: str) -> list[str]:
    """Of these responses, the ones another replica has claimed (it found this one's lease
    expired and finished them)."""
    rows = tx.rows(
        "SELECT id FROM response WHERE id = ANY(:ids) AND replica_id IS DISTINCT FROM :me",
        {"ids": response_ids, "me": me},
    )
    return [row[0] for row in rows]


def request_cancel(tx: Tx, response_id: str, details: dict[str, Any] | None = None) -> bool:
    """Ask the replica running the response to stop it (`details`: a deadline's reason, to end
    it `incomplete`; else `cancelled`); False when it is no longer running."""
    told = tx.rows(
        "WITH changed AS (UPDATE response SET cancel_requested = TRUE, stop_details = :details"
        " WHERE id = :id AND status = 'in_progress' RETURNING id)"
        " SELECT pg_notify(:channel, id) FROM changed",
        {
            "id": response_id,
            "details": json.dumps(details) if details is not None else None,
            "channel": CANCEL_CHANNEL,
        },
    )
    return bool(told)


def cancel_requests(tx: Tx, me: str) -> list[tuple[str, dict[str, Any] | None]]:
    """This replica's running responses another replica asked to stop, with their details."""
    rows = tx.rows(
        "SELECT id, stop_details FROM response WHERE replica_id = :me AND cancel_requested"
        " AND status = 'in_progress'",
        {"me": me},
    )
    return [(row[0], json.loads(row[1]) if row[1] else None) for row in rows]


def deleted_while_running(tx: Tx, me: str) -> list[str]:
    """This replica's running responses that were deleted on another replica."""
    rows = tx.rows(
        "SELECT id FROM response WHERE replica_id = :me AND deleted_at IS NOT NULL"
        " AND status = 'in_progress'",
        {"me": me},
    )
    return [row[0] for row in rows]


def anyone_waiting(tx: Tx, lease: float) -> bool:
    """Whether a turn of a live replica waits in the shared line."""
    rows = tx.rows(f"SELECT {_ANYONE_WAITING}", {"lease": lease})
    return bool(rows[0][0])


@repeatable()
def join_line(tx: Tx, response_id: str, limit: int, lease: float) -> bool:
    """Join the line at the place the response took when it arrived (its `admission_at`),
    and take a slot at once when one is free and no turn of a live replica waits (the
    common case: one transaction instead of two). True when admitted; a turn left waiting
    tells every replica (DEMAND)."""
    return bool(
        _under_admission_lock(
            tx,
            "WITH joined AS (UPDATE response SET"
            f" admission_at = COALESCE(admission_at, {NOW}), admission = CASE"
            # (a repeat after a commit whose answer was lost keeps the slot it took)
            " WHEN admission = 'admitted' THEN 'admitted'"
            f" WHEN ({_ADMITTED}) < :limit AND NOT EXISTS (SELECT 1 FROM response r"
            f"   WHERE {_WAITING} AND r.id <> :id)"
            " THEN 'admitted' ELSE 'waiting' END"
            " WHERE id = :id RETURNING admission),"
            " told AS (SELECT pg_notify(:channel, :demand) FROM joined"
            "   WHERE admission = 'waiting')"
            " SELECT (SELECT admission = 'admitted' FROM joined), (SELECT count(*) FROM told)",
            {
                "id": response_id,
                "limit": limit,
                "lease": lease,
                "channel": ADMISSION_CHANNEL,
                "demand": DEMAND,
            },
        )
    )


@repeatable()
def take_slot(tx: Tx, response_id: str, limit: int, lease: float) -> bool:
    """Whether the response holds a slot: one handed to it already (whose notification may
    have been lost), or one it takes now because fewer than `limit` slots are held and no
    turn of a live replica waits before it. Still waiting, it tells every replica again
    (DEMAND: a replica may have missed it, and hold idle slots in its block)."""
    return bool(
        _under_admission_lock(
            tx,
            "WITH took AS (UPDATE response SET admission = 'admitted' WHERE id = :id"
            " AND (admission = 'admitted'"
            f"   OR admission = 'waiting' AND ({_ADMITTED}) < :limit"
            "   AND NOT EXISTS (SELECT 1 FROM response r, response me WHERE me.id = :id"
            f"     AND {_WAITING} AND r.id <> :id"
            "     AND (r.admission_at, r.id) < (me.admission_at, me.id)))"
            " RETURNING TRUE),"
            " told AS (SELECT pg_notify(:channel, :demand)"
            "   WHERE NOT EXISTS (SELECT 1 FROM took))"
            " SELECT EXISTS (SELECT 1 FROM took), (SELECT count(*) FROM told)",
            {
                "id": response_id,
                "limit": limit,
                "lease": lease,
                "channel": ADMISSION_CHANNEL,
                "demand": DEMAND,
            },
        )
    )


# A turn waiting in its replica's own queue (engine/replicas/shared_admission.py) holds no slot and
# no place in the shared line; its row says so, that every replica reads the task as queued.
IN_OWN_QUEUE = "own_queue"


def mark_in_own_queue(tx: Tx, response_id: str, waiting: bool) -> None:
    """Mark a turn as waiting in its replica's own queue, or (`waiting` False) as out of it:
    admitted from the block, or gone. Nothing else is changed: joining the shared line
    writes over the mark."""
    if waiting:
        statement = "UPDATE response SET admission = :queued WHERE id = :id AND admission IS NULL"
    else:
        statement = "UPDATE response SET admission = NULL WHERE id = :id AND admission = :queued"
    tx.execute(statement, {"id": response_id, "queued": IN_OWN_QUEUE})


# What `take_block_slot` found.
GRANTED = "granted"  # the block grew by the slot
WAIT_HERE = "here"  # every slot held is in this replica's block, and nobody waits in the line
IN_LINE = "line"  # a slot is held elsewhere, or turns wait: this turn joins the shared line


@repeatable()
def take_block_slot(tx: Tx, me: str, limit: int, lease: float) -> str:
    """Grow this replica's block by a slot when fewer than `limit` are held and nobody waits
    in the line (GRANTED). Else whether its turn may wait for a slot of its own block
    (WAIT_HERE: nobody else holds or wants one) or must join the shared line (IN_LINE).
    Marked with the unit's id (`tx.unit_id`), so that a repeat after a lost answer finds it
    done instead of taking a second slot."""
    return str(
        _under_admission_lock(
            tx,
            "WITH held AS (SELECT"
            f"   {_turns_admitted()} AS turns, {_BLOCKS} AS blocks,"
            "   (SELECT l.slots FROM replica l WHERE l.id = :me"
            f"     AND l.heartbeat_at > {NOW} - :lease) AS mine,"
            f"   {_ANYONE_WAITING} AS line,"
            f"   {_DONE_ALREADY} AS done),"
            " grown AS (UPDATE replica SET slots = slots + 1, slots_op = :op WHERE id = :me"
            "   AND (SELECT NOT done AND mine IS NOT NULL AND NOT line"
            "     AND turns + blocks < :limit FROM held)"
            "   RETURNING 1)"
            " SELECT CASE WHEN EXISTS (SELECT 1 FROM grown) OR (SELECT done FROM held)"
            "   THEN :granted"
            "   WHEN (SELECT NOT line AND turns = 0 AND mine = blocks FROM held) THEN :here"
            "   ELSE :in_line END",
            {
                "me": me,
                "op": tx.unit_id,
                "limit": limit,
                "lease": lease,
                "granted": GRANTED,
                "here": WAIT_HERE,
                "in_line": IN_LINE,
            },
        )
    )


def _until_the_lease_lapsed(me: str, count: int, limit: int, lease: float) -> float:
    return lease + LAPSE_MARGIN_SECONDS


@repeatable(for_seconds=_until_the_lease_lapsed)
def give_back_block_slots(tx: Tx, me: str, count: int, limit: int, lease: float) -> int:
    """Take `count` slots out of this replica's block, handing each to the next turn in line
    (admitted here, its id told on ADMISSION_CHANNEL). How many turns still wait after.

    A give-back whose outcome is not known (its answer was lost after the COMMIT) is sent
    again, marked with the unit's id (`tx.unit_id`), until the database answers: put back in
    the block in memory, its slots could admit turns the others no longer count. The id tells
    a give-back already done as long as no other change of the block came between, and none
    can: the admission line's thread (Order.LINE), which makes them all (and renews the
    lease), waits meanwhile. It gives up, raising OutcomeUnknown, only once the lease has
    lapsed: its renewal then empties the block. Any other failure is raised at once: nothing
    of it landed, and the slots are still the block's."""
    mine_after = "CASE WHEN l.id = :me THEN GREATEST(l.slots - :count, 0) ELSE l.slots END"
    held_after = (
        f"{_turns_admitted()} + (SELECT COALESCE(sum({mine_after}), 0) FROM replica l"
        f" WHERE l.heartbeat_at > {NOW} - :lease)"
    )
    return int(
        _hand_over(
            tx,
            "UPDATE replica SET slots = GREATEST(slots - :count, 0), slots_op = :op"
            " WHERE id = :me AND slots_op IS DISTINCT FROM :op",
            # (a repeat after a lost answer: given back already, nothing more to hand)
            f"CASE WHEN {_DONE_ALREADY} THEN 0 ELSE LEAST(:count, :limit - ({held_after})) END",
            "",
            {"me": me, "op": tx.unit_id, "count": count, "limit": limit, "lease": lease},
        )
    )


@repeatable()
def leave_line(tx: Tx, response_id: str, limit: int, lease: float) -> int:
    """Give the slot back (or leave the line), handing it to the first turn in line on any
    live replica: that turn is admitted here, and its id told on ADMISSION_CHANNEL. How many
    turns still wait after."""
    return int(
        _hand_over(
            tx,
            "UPDATE response SET admission = NULL WHERE id = :id",
            # (the statement's snapshot still counts the leaving turn's slot: not it)
            f"LEAST(1, :limit - ({_turns_admitted(' AND r.id <> :id')} + {_BLOCKS}))",
            " AND r.id <> :id",
            {"id": response_id, "limit": limit, "lease": lease},
        )
    )


def _hand_over(tx: Tx, free: str, how_many: str, also: str, params: dict[str, Any]) -> Any:
    """Free slots (`free`, a statement) and hand up to `how_many` (an expression) to the turns
    first in line (`also`: a further condition on them), in one statement under the line's
    lock; how many turns wait after."""
    return _under_admission_lock(
        tx,
        f"WITH freed AS ({free}),"
        " handed AS (UPDATE response SET admission = 'admitted' WHERE id IN ("
        f"   SELECT r.id FROM response r WHERE {_WAITING}{also}"
        f"   ORDER BY r.admission_at, r.id LIMIT GREATEST(0, {how_many})) RETURNING id),"
        " told AS (SELECT pg_notify(:channel, id) FROM handed)"
        f" SELECT (SELECT count(*) FROM response r WHERE {_WAITING}{also})"
        "   - (SELECT count(*) FROM told)",
        {**params, "channel": ADMISSION_CHANNEL},
    )


def _under_admission_lock(tx: Tx, statement: str, params: dict[str, Any]) -> Any:
    """Run an admission statement under the line's transaction lock, which makes its count
    and its change one step for every replica at once; its first column, or None. (On the
    line's lane, Order.LINE, the transaction is sent pipelined: BEGIN, the lock and the
    statement in one round trip, where each would cost a wait for the GIL on a busy
    server.)"""
    tx.rows("SELECT pg_advisory_xact_lock(?)", (_ADMISSION_LOCK,))
    rows = tx.rows(statement, params)
    return rows[0][0] if rows else None


def clear_slots(tx: Tx, me: str, finished_before: float | None = None) -> None:
    """Free the slots this replica's turns still hold on paper: every one and its block (at
    start, when none of its turns runs), or those of turns finished before `finished_before`
    (a slot whose release never reached the database; a turn winds down in seconds)."""
    statement = (
        "UPDATE response SET admission = NULL WHERE replica_id = :me AND admission IS NOT NULL"
    )
    if finished_before is not None:
        statement += " AND status <> 'in_progress' AND finished_at < :before"
    else:
        tx.execute("UPDATE replica SET slots = 0 WHERE id = :me", {"me": me})
    tx.execute(statement, {"me": me, "before": finished_before})
