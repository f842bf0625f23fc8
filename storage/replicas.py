"""Replicas on one PostgreSQL database: leases, turns taken over from a dead replica, cancel
requests between replicas, and the shared admission line (engine/cluster.py uses them).

Times are the database's clock (`clock_timestamp()`), so replicas on hosts whose clocks
disagree still agree on whose lease expired. Each function is one transaction; the
conditional UPDATEs are what decide between replicas racing for the same row.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from storage.db import Database, run_statement

NOW = "EXTRACT(EPOCH FROM clock_timestamp())"
# Cancel requests and freed admission slots are announced on these channels, as committed
# events are on storage.db.EVENTS_CHANNEL (payload: the response id).
CANCEL_CHANNEL = "uhp_cancel"
ADMISSION_CHANNEL = "uhp_admission"
# One key for the admission line's transaction lock (pg_advisory_xact_lock).
_ADMISSION_LOCK = 0x75687061  # "uhpa"

# A response whose replica holds a live lease; `:lease` seconds, `r` the response.
_LIVE = (
    "EXISTS (SELECT 1 FROM replica l WHERE l.id = r.replica_id"
    f" AND l.heartbeat_at > {NOW} - :lease)"
)
# What `_as_psycopg` rewrites: a quoted literal, a `::` cast, a `:name` parameter, a `%`.
_TOKENS = re.compile(r"'(?:[^']|'')*'|::|:(\w+)|%")
# How many turns of live replicas hold a slot.
_ADMITTED = f"SELECT count(*) FROM response r WHERE r.admission = 'admitted' AND {_LIVE}"


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


def renew_lease(db: Database, replica_id: str) -> None:
    run_statement(
        db,
        f"INSERT INTO replica (id, heartbeat_at, started_at) VALUES (:id, {NOW}, {NOW})"
        f" ON CONFLICT (id) DO UPDATE SET heartbeat_at = {NOW}",
        id=replica_id,
    )


def lease_live(db: Database, replica_id: str, lease: float) -> bool:
    """Whether a replica of this id holds a live lease."""
    rows = run_statement(
        db,
        f"SELECT 1 FROM replica WHERE id = :id AND heartbeat_at > {NOW} - :lease",
        id=replica_id,
        lease=lease,
    )
    return bool(rows)


def drop_lease(db: Database, replica_id: str) -> None:
    run_statement(db, "DELETE FROM replica WHERE id = :id", id=replica_id)


def orphans(db: Database, me: str, lease: float, *, own: bool) -> list[Orphan]:
    """Unfinished responses no live replica runs: their replica's lease expired; with `own`
    (at start), also this replica's from a former life and those of no replica (rows from
    before leases)."""
    mine = "r.replica_id IS NULL OR r.replica_id = :me OR" if own else ""
    rows = run_statement(
        db,
        "SELECT r.id, r.session_id, r.replica_id, r.cancel_requested, r.stop_details"
        " FROM response r"
        f" WHERE r.status = 'in_progress' AND ({mine}"
        f" (r.replica_id <> :me AND NOT {_LIVE}))",
        me=me,
        lease=lease,
    )
    return [Orphan(*row) for row in rows]


def take_over(db: Database, orphan: Orphan, me: str, lease: float) -> bool:
    """Claim an orphan for this replica to finish; False when another replica did first (or
    its owner renewed its lease since it was found)."""
    owner = "r.replica_id IS NULL" if orphan.replica_id is None else "r.replica_id = :old"
    changed = run_statement(
        db,
        "UPDATE response r SET replica_id = :me, admission = NULL"
        f" WHERE r.id = :id AND r.status = 'in_progress' AND {owner}"
        f" AND (r.replica_id IS NULL OR r.replica_id = :me OR NOT {_LIVE})",
        me=me,
        id=orphan.response_id,
        old=orphan.replica_id,
        lease=lease,
    )
    return bool(changed == 1)


def forget_expired(db: Database, lease: float) -> list[str]:
    """Delete the leases that expired; the ids this call deleted (each replica's containers
    are then reaped by the one replica that deleted its lease)."""
    rows = run_statement(
        db, f"DELETE FROM replica WHERE heartbeat_at <= {NOW} - :lease RETURNING id", lease=lease
    )
    return [row[0] for row in rows]


def taken_over(db: Database, response_ids: list[str], me: str) -> list[str]:
    """Of these responses, the ones another replica has claimed (it found this one's lease
    expired and finished them)."""
    rows = run_statement(
        db,
        "SELECT id FROM response WHERE id = ANY(:ids) AND replica_id IS DISTINCT FROM :me",
        ids=response_ids,
        me=me,
    )
    return [row[0] for row in rows]


def request_cancel(db: Database, response_id: str, details: dict[str, Any] | None = None) -> bool:
    """Ask the replica running the response to stop it (`details`: a deadline's reason, to end
    it `incomplete`; else `cancelled`); False when it is no longer running."""
    changed = run_statement(
        db,
        "UPDATE response SET cancel_requested = TRUE, stop_details = :details"
        " WHERE id = :id AND status = 'in_progress'",
        notify=CANCEL_CHANNEL,
        id=response_id,
        details=json.dumps(details) if details is not None else None,
    )
    return bool(changed)


def cancel_requests(db: Database, me: str) -> list[tuple[str, dict[str, Any] | None]]:
    """This replica's running responses another replica asked to stop, with their details."""
    rows = run_statement(
        db,
        "SELECT id, stop_details FROM response WHERE replica_id = :me AND cancel_requested"
        " AND status = 'in_progress'",
        me=me,
    )
    return [(row[0], json.loads(row[1]) if row[1] else None) for row in rows]


def deleted_while_running(db: Database, me: str) -> list[str]:
    """This replica's running responses that were deleted on another replica."""
    rows = run_statement(
        db,
        "SELECT id FROM response WHERE replica_id = :me AND deleted_at IS NOT NULL"
        " AND status = 'in_progress'",
        me=me,
    )
    return [row[0] for row in rows]


def join_line(db: Database, response_id: str, limit: int, lease: float) -> bool:
    """Join the line at the place the response took when it arrived (its `admission_at`),
    and take a slot at once when one is free and no turn of a live replica waits (the
    common case: one transaction instead of two). True when admitted."""
    return bool(
        _under_admission_lock(
            db,
            f"UPDATE response SET admission_at = COALESCE(admission_at, {NOW}), admission = CASE"
            # (a repeat after a commit whose answer was lost keeps the slot it took)
            " WHEN admission = 'admitted' THEN 'admitted'"
            f" WHEN ({_ADMITTED}) < :limit AND NOT EXISTS (SELECT 1 FROM response r"
            f"   WHERE r.admission = 'waiting' AND r.id <> :id AND {_LIVE})"
            " THEN 'admitted' ELSE 'waiting' END"
            " WHERE id = :id RETURNING admission = 'admitted'",
            id=response_id,
            limit=limit,
            lease=lease,
        )
    )


def take_slot(db: Database, response_id: str, limit: int, lease: float) -> bool:
    """Whether the response holds a slot: one handed to it already (whose notification may
    have been lost), or one it takes now because fewer than `limit` turns of live replicas
    hold a slot and no turn of a live replica waits before it."""
    return bool(
        _under_admission_lock(
            db,
            "UPDATE response SET admission = 'admitted' WHERE id = :id AND (admission = 'admitted'"
            f" OR admission = 'waiting' AND ({_ADMITTED}) < :limit"
            " AND NOT EXISTS (SELECT 1 FROM response r, response me WHERE me.id = :id"
            "   AND r.admission = 'waiting' AND r.id <> :id"
            "   AND (r.admission_at, r.id) < (me.admission_at, me.id)"
            f"   AND {_LIVE}))"
            " RETURNING TRUE",
            id=response_id,
            limit=limit,
            lease=lease,
        )
    )


def _under_admission_lock(db: Database, statement: str, **params: Any) -> Any:
    """Run an admission statement under the line's transaction lock, which makes its count
    and its change one step for every replica at once; its first column, or None. The
    transaction is sent whole (psycopg's pipeline): one round trip, where each would cost a
    wait for the GIL on a busy server. A connection the database ended under it is replaced
    and the statement sent once more: each of them can be repeated (join_line keeps a slot
    its lost commit took)."""
    query = _as_psycopg(statement)
    for attempt in (1, 2):
        conn = db.connection()
        try:
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADMISSION_LOCK,))
                cursor = conn.execute(query, params)
                conn.execute("COMMIT")
        except Exception:
            if not conn.closed:
                conn.rollback()  # a failed pipeline leaves its transaction open
                raise
            if attempt == 2:
                raise
            continue
        row = cursor.fetchone() if cursor.description else None
        return row[0] if row else None
    raise AssertionError("unreachable: the second attempt returns or raises")


@functools.cache
def _as_psycopg(statement: str) -> str:
    """A statement written with SQLAlchemy's `:name` parameters (the fragments it shares with
    `run_statement`'s), as psycopg spells them: `%(name)s`, every literal `%` doubled, quoted
    literals and `::` casts otherwise left alone."""

    def rewrite(token: re.Match[str]) -> str:
        if token.group(1) is not None:
            return f"%({token.group(1)})s"
        return token.group(0).replace("%", "%%")

    return _TOKENS.sub(rewrite, statement)


def clear_slots(db: Database, me: str, *, finished_before: float | None = None) -> None:
    """Free the slots this replica's turns still hold on paper: every one (at start, when
    none of its turns runs), or those of turns finished before `finished_before` (a slot
    whose release never reached the database; a turn winds down in seconds)."""
    statement = (
        "UPDATE response SET admission = NULL WHERE replica_id = :me AND admission IS NOT NULL"
    )
    if finished_before is not None:
        statement += " AND status <> 'in_progress' AND finished_at < :before"
    run_statement(db, statement, me=me, before=finished_before)


def leave_line(db: Database, response_id: str, limit: int, lease: float) -> None:
    """Give the slot back (or leave the line), handing it to the first turn in line on any
    live replica: that turn is admitted here, and its id told on ADMISSION_CHANNEL."""
    _under_admission_lock(
        db,
        "WITH freed AS (UPDATE response SET admission = NULL WHERE id = :id),"
        " handed AS (UPDATE response SET admission = 'admitted' WHERE id = ("
        "   SELECT r.id FROM response r WHERE r.admission = 'waiting' AND r.id <> :id"
        f"   AND {_LIVE} ORDER BY r.admission_at, r.id LIMIT 1)"
        # (the statement's snapshot still counts the leaving turn's slot: not it)
        f" AND ({_ADMITTED} AND r.id <> :id) < :limit RETURNING id)"
        " SELECT pg_notify(:channel, id) FROM handed",
        id=response_id,
        limit=limit,
        lease=lease,
        channel=ADMISSION_CHANNEL,
    )
