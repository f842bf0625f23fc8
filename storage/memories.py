"""Memories, their grants and their records' versions (Memories §2-§5), as rows.

Nothing here decides who may do what: the chapter (uhp_server/memories/access.py) reads the
tree and the grants from here and decides, before any of the writes below is asked for.

A record is every row with its id, one per version. Of those, the current one is the newest;
it is `active` or `forgotten`, and every earlier one is `superseded`, so "the current records
of a memory" is a filter on status and never a search for each record's newest version. A
revision appends a version after locking the one it closes: two revisions of one version at
once cannot both land (`append_version` answers None to the second, which revises again).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete, or_, select
from sqlmodel.sql.expression import SelectOfScalar

from storage.tables import (
    MemoryGrantRow,
    MemoryQueryRow,
    MemoryRecordRow,
    MemoryReplayRow,
    MemoryRow,
)
from storage.unit import Tx

ACTIVE, SUPERSEDED, FORGOTTEN = "active", "superseded", "forgotten"
# The first key of the PostgreSQL transaction locks that take one member's memory count one
# change at a time (pg_advisory_xact_lock(int, int): a key space apart from the one-key
# locks of migrations and the admission line); the second is the member's hash.
_COUNT_LOCKS = 0x75686D6D  # "uhmm"
CURRENT = (ACTIVE, FORGOTTEN)  # the status of a record's newest version


# -- the tree -------------------------------------------------------------------------------
def get_memory(tx: Tx, memory_id: str) -> MemoryRow | None:
    return tx.orm.get(MemoryRow, memory_id)


@dataclass(frozen=True)
class Skeleton:
    """A node as access is decided over it, and the provider that keeps its records."""

    id: str
    parent_id: str | None
    restricted: bool
    provider: str
    created_at_ms: int


# Access is decided over the part of the tree a request touches, never the whole tree: one
# principal's memories, however many, are never read to answer another's request (issue 29).
# Each read below gives nodes in the order a listing shows them, oldest first.
_COLUMNS = "id, parent_id, restricted, provider, created_at_ms"
_CHUNK = 500  # ids in one `IN (...)`: well under SQLite's and PostgreSQL's parameter limits


def with_ancestors(tx: Tx, memory_ids: Iterable[str]) -> list[Skeleton]:
    """The memories named and every ancestor of each, up to its root (a recursive walk up
    the parent chain: as many rows as the chains are long)."""
    found: dict[str, Skeleton] = {}
    for chunk in _chunks(sorted(set(memory_ids))):
        marks = ", ".join("?" for _ in chunk)
        found.update(
            (node.id, node)
            for node in _skeletons(
                tx.rows(
                    f"WITH RECURSIVE up({_COLUMNS}) AS ("
                    f" SELECT {_COLUMNS} FROM memory WHERE id IN ({marks})"
                    " UNION"  # (not ALL: a chain met twice is walked once)
                    " SELECT m.id, m.parent_id, m.restricted, m.provider, m.created_at_ms"
                    " FROM memory m JOIN up ON m.id = up.parent_id"
                    f") SELECT {_COLUMNS} FROM up",
                    chunk,
                )
            )
        )
    return _oldest_first(found.values())


def granted_with_ancestors(tx: Tx, principals: Iterable[str]) -> list[Skeleton]:
    """Every memory on which one of `principals` holds a grant, and every ancestor of each:
    where a caller may enter the tree is among these (a grant starts every way in). The
    grants are read first, from the index on (principal, memory_id) alone (migration 0019:
    one principal holding most grants must not make another's read scan them all), and the
    walk up starts from their ids."""
    names = sorted(set(principals))
    marks = ", ".join("?" for _ in names)
    granted = tx.rows(f"SELECT memory_id FROM memory_grant WHERE principal IN ({marks})", names)
    return with_ancestors(tx, (str(row[0]) for row in granted))


def children_of(tx: Tx, memory_ids: Iterable[str]) -> list[Skeleton]:
    """The children of each memory named, one level down."""
    found: list[Skeleton] = []
    for chunk in _chunks(sorted(set(memory_ids))):
        marks = ", ".join("?" for _ in chunk)
        found.extend(
            _skeletons(
                tx.rows(f"SELECT {_COLUMNS} FROM memory WHERE parent_id IN ({marks})", chunk)
            )
        )
    return _oldest_first(found)


@dataclass(frozen=True)
class Subtree:
    """A memory and what is below it, nearest levels first; `capped` when more was there
    than was asked for (then the farthest are left out, never a parent of one kept)."""

    nodes: list[Skeleton]
    capped: bool
    # Those whose children are all among `nodes`: every node when nothing was left out;
    # else those at least two levels above the farthest kept (its level may be partial).
    complete: list[str] = field(default_factory=list)


_NO_DEPTH = 1_000_000  # `depth` unbounded: deeper than any tree is


def subtree(tx: Tx, memory_id: str, depth: int | None, most: int | None) -> Subtree:
    """The memory and its descendants down to `depth` levels (all when None), breadth
    first, at most `most` of them (all when None): a recursive walk down the parent index
    that stops reading once it has `most` + 1 rows, so a large tree below costs no more
    than the cap."""
    order = " ORDER BY 6" if tx.dialect.name == "sqlite" else ""  # SQLite: a queue by level
    # (PostgreSQL walks a recursive query level by level of itself, and stops at the LIMIT.)
    limit = f" LIMIT {int(most) + 1}" if most is not None else ""
    rows = tx.rows(
        f"WITH RECURSIVE down({_COLUMNS}, level) AS ("
        f" SELECT {_COLUMNS}, 0 FROM memory WHERE id = ?"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.restricted, m.provider, m.created_at_ms, down.level + 1"
        " FROM memory m JOIN down ON m.parent_id = down.id WHERE down.level < ?"
        f"{order}"
        f") SELECT {_COLUMNS}, level FROM down{limit}",
        (memory_id, _NO_DEPTH if depth is None else depth),
    )
    by_level = sorted(rows, key=lambda row: (int(row[5]), int(row[4]), str(row[0])))
    capped = most is not None and len(by_level) > most
    kept = by_level[:most] if most is not None else by_level
    # A node at the depth asked has no children read; below the farthest level kept when
    # some were left out, only nodes two levels up are known to have all theirs.
    last = int(kept[-1][5]) if kept else 0
    deepest = (last - 2) if capped else last
    if depth is not None:
        deepest = min(deepest, depth - 1)
    complete = [str(row[0]) for row in kept if int(row[5]) <= deepest]
    return Subtree(_skeletons(row[:5] for row in kept), capped, complete)


def grants_held(
    tx: Tx, principals: Iterable[str], memory_ids: Iterable[str]
) -> list[tuple[str, list[str]]]:
    """The privileges `principals` hold on each memory named: (memory, privileges) per grant."""
    names = sorted(set(principals))
    found: list[tuple[str, list[str]]] = []
    for chunk in _chunks(sorted(set(memory_ids))):
        rows = tx.orm.exec(
            select(MemoryGrantRow.memory_id, MemoryGrantRow.privileges).where(
                col(MemoryGrantRow.principal).in_(names), col(MemoryGrantRow.memory_id).in_(chunk)
            )
        )
        found.extend((str(memory_id), list(privileges or ())) for memory_id, privileges in rows)
    return found


def _one_at_a_time(tx: Tx, owner_id: str) -> None:
    """What changes one member's count waits, until the transaction ends, for any other
    transaction changing it: its count and its insert are then one step. SQLite has one
    writer, so nothing to do; PostgreSQL's READ COMMITTED would let two creations count the
    same rows and both insert, so each takes a transaction lock on the member (a statement
    after it sees what the one before committed)."""
    if tx.dialect.name == "postgresql":
        tx.rows("SELECT pg_advisory_xact_lock(?, hashtext(?))", (_COUNT_LOCKS, owner_id))


def owned_count(tx: Tx, owner_id: str) -> int:
    """How many memories one principal has created and that are still there."""
    return int(tx.rows("SELECT count(*) FROM memory WHERE owner_id = ?", (owner_id,))[0][0])


def _skeletons(rows: Iterable[Any]) -> list[Skeleton]:
    return [
        Skeleton(str(i), parent, bool(restricted), str(provider), int(created))
        for i, parent, restricted, provider, created in rows
    ]


def _oldest_first(nodes: Iterable[Skeleton]) -> list[Skeleton]:
    return sorted(nodes, key=lambda node: (node.created_at_ms, node.id))


def _chunks(ids: list[str]) -> list[list[str]]:
    return [ids[start : start + _CHUNK] for start in range(0, len(ids), _CHUNK)]


def memories_by_ids(tx: Tx, memory_ids: list[str]) -> dict[str, MemoryRow]:
    rows = tx.orm.exec(select(MemoryRow).where(col(MemoryRow.id).in_(memory_ids)))
    return {row.id: row for row in rows}


class TooMany(Exception):
    """The creator already owns as many memories as one principal may."""


def insert_memory(
    tx: Tx, row: MemoryRow, owner_grant: MemoryGrantRow, most_owned: int | None = None
) -> MemoryRow | None:
    """The memory with its creator's grant; None when its parent went in the meantime.
    TooMany, writing nothing, when its creator owns `most_owned` memories already (counted
    in the writing transaction, one creator's creations one at a time: `_one_at_a_time`)."""
    if row.parent_id is not None and get_memory(tx, row.parent_id) is None:
        return None
    if most_owned is not None:
        _one_at_a_time(tx, row.owner_id)
        if owned_count(tx, row.owner_id) >= most_owned:
            raise TooMany(row.owner_id)
    tx.orm.add(row)
    tx.orm.add(owner_grant)
    tx.orm.flush()
    return row


@dataclass(frozen=True)
class MemoryChanges:
    """What a PUT changes; None leaves a field as it is (`parent_id` is moved only when
    `move` is set, since None there names the root)."""

    name: str | None = None
    description: str | None = None
    restricted: bool | None = None
    move: bool = False
    parent_id: str | None = None


def update_memory(tx: Tx, memory_id: str, changes: MemoryChanges) -> MemoryRow | None:
    """The memory changed; None when it is gone, or when the move would now make a cycle
    (checked again here: another move may have landed since the caller's was checked)."""
    row = get_memory(tx, memory_id)
    if row is None or (changes.move and _would_cycle(tx, memory_id, changes.parent_id)):
        return None
    if changes.name is not None:
        row.name = changes.name
    if changes.description is not None:
        row.description = changes.description
    if changes.restricted is not None:
        row.restricted = changes.restricted
    if changes.move:
        row.parent_id = changes.parent_id
    row.updated_at_ms = now_ms()
    tx.orm.add(row)
    return row


def _would_cycle(tx: Tx, memory_id: str, parent_id: str | None) -> bool:
    """Whether `memory_id` is `parent_id` or one of its ancestors (or the new parent is gone)."""
    seen: set[str] = set()
    node = parent_id
    while node is not None and node not in seen:
        if node == memory_id:
            return True
        seen.add(node)
        above = get_memory(tx, node)
        if above is None:
            return True
        node = above.parent_id
    return node is not None  # a cycle already there: refuse to add to it


def delete_memories(tx: Tx, memory_ids: list[str]) -> None:
    """The memories and their grants, for good (their records are their provider's:
    `delete_records` for the embedded one)."""
    tx.orm.exec(delete(MemoryGrantRow).where(col(MemoryGrantRow.memory_id).in_(memory_ids)))
    tx.orm.exec(delete(MemoryQueryRow).where(col(MemoryQueryRow.memory_id).in_(memory_ids)))
    tx.orm.exec(delete(MemoryRow).where(col(MemoryRow.id).in_(memory_ids)))


def record_counts(tx: Tx, memory_ids: Iterable[str]) -> dict[str, int]:
    """The active records of each memory (a forgotten one has left every ordinary read)."""
    ids = list(memory_ids)
    if not ids:
        return {}
    rows = tx.orm.exec(
        select(MemoryRecordRow.memory_id, func.count())
        .where(col(MemoryRecordRow.memory_id).in_(ids), MemoryRecordRow.status == ACTIVE)
        .group_by(col(MemoryRecordRow.memory_id))
    )
    return {memory_id: int(count) for memory_id, count in rows}


# -- grants ---------------------------------------------------------------------------------
def grants_of(tx: Tx, principals: Iterable[str]) -> list[MemoryGrantRow]:
    """Every grant held by any of `principals`, wherever it sits."""
    names = list(principals)
    return list(tx.orm.exec(select(MemoryGrantRow).where(col(MemoryGrantRow.principal).in_(names))))


def grants_on(tx: Tx, memory_ids: Iterable[str]) -> list[MemoryGrantRow]:
    ids = list(memory_ids)
    return list(
        tx.orm.exec(
            select(MemoryGrantRow)
            .where(col(MemoryGrantRow.memory_id).in_(ids))
            .order_by(col(MemoryGrantRow.created_at_ms), col(MemoryGrantRow.id))
        )
    )


def put_grant(tx: Tx, row: MemoryGrantRow, by: str) -> MemoryGrantRow:
    """One grant per principal per node: a second replaces the first's privileges (and
    keeps its id). `by`: the member who grants (see `_charge_taker`)."""
    if "delete" not in (row.privileges or ()):
        _charge_taker(tx, row.memory_id, row.principal, by)
    found = tx.orm.exec(
        select(MemoryGrantRow).where(
            MemoryGrantRow.memory_id == row.memory_id, MemoryGrantRow.principal == row.principal
        )
    ).first()
    if found is None:
        try:
            with tx.orm.begin_nested():  # a savepoint: a lost race leaves the rest usable
                tx.orm.add(row)
        except IntegrityError:  # the same grant, made at the same moment: replace it
            return put_grant(tx, row, by)
        return row
    found.privileges = list(row.privileges)
    tx.orm.add(found)
    return found


def delete_grant(tx: Tx, memory_id: str, grant_id: str, by: str) -> bool:
    """`by`: the member who revokes (see `_charge_taker`)."""
    row = tx.orm.get(MemoryGrantRow, grant_id)
    if row is None or row.memory_id != memory_id:
        return False
    _charge_taker(tx, memory_id, row.principal, by)
    tx.orm.delete(row)
    return True


def _charge_taker(tx: Tx, memory_id: str, principal: str, by: str) -> None:
    """A memory counts against its creator's limit (`owner_id`) while the creator keeps its
    own `delete` on it: when another member takes that away (revokes the creator's grant
    there, or grants it less), the memory counts against that member from then on. So what
    someone else keeps a creator from deleting never uses up its share, and a creator that
    takes its own grant away still pays for what it made."""
    _one_at_a_time(tx, by)
    tx.execute(
        "UPDATE memory SET owner_id = ? WHERE id = ? AND ? = 'member:' || owner_id"
        " AND owner_id <> ?",
        (by, memory_id, principal, by),
    )


# -- records --------------------------------------------------------------------------------
def current_record(tx: Tx, memory_id: str, record_id: str) -> MemoryRecordRow | None:
    """The newest version of a record of this memory: a record of another memory is not
    found through this one (§3.3)."""
    return tx.orm.exec(
        select(MemoryRecordRow)
        .where(MemoryRecordRow.id == record_id, MemoryRecordRow.memory_id == memory_id)
        .order_by(col(MemoryRecordRow.version).desc())
    ).first()


def record_as_of(tx: Tx, memory_id: str, record_id: str, instant: int) -> MemoryRecordRow | None:
    """The version the memory held at `instant` (§5.3); None before it was written or
    after it was forgotten."""
    return tx.orm.exec(
        _held_at(select(MemoryRecordRow), instant).where(
            MemoryRecordRow.id == record_id, MemoryRecordRow.memory_id == memory_id
        )
    ).first()


def record_versions(tx: Tx, memory_id: str, record_id: str) -> list[MemoryRecordRow]:
    """Every version, oldest first (§5.3 history)."""
    return list(
        tx.orm.exec(
            select(MemoryRecordRow)
            .where(MemoryRecordRow.id == record_id, MemoryRecordRow.memory_id == memory_id)
            .order_by(col(MemoryRecordRow.version))
        )
    )


@dataclass(frozen=True)
class RecordQuery:
    """A listing of one memory's records: current ones (`active`, or with `forgotten` ones
    too for `include=all`), or those the memory held at `as_of`; after `after`, by id."""

    memory_id: str
    type: str | None = None
    include_forgotten: bool = False
    as_of: int | None = None
    after: str | None = None
    limit: int = 100


def list_records(tx: Tx, query: RecordQuery) -> list[MemoryRecordRow]:
    statement = select(MemoryRecordRow).where(MemoryRecordRow.memory_id == query.memory_id)
    if query.as_of is not None:
        statement = _held_at(statement, query.as_of)
    elif query.include_forgotten:
        statement = statement.where(col(MemoryRecordRow.status).in_(CURRENT))
    else:
        statement = statement.where(MemoryRecordRow.status == ACTIVE)
    if query.type is not None:
        statement = statement.where(MemoryRecordRow.type == query.type)
    if query.after is not None:
        statement = statement.where(col(MemoryRecordRow.id) > query.after)
    statement = statement.order_by(col(MemoryRecordRow.id)).limit(query.limit)
    return list(tx.orm.exec(statement))


def insert_record(tx: Tx, rows: list[MemoryRecordRow]) -> list[MemoryRecordRow] | None:
    """New records, each its version 1; None when their memory went in the meantime."""
    if rows and get_memory(tx, rows[0].memory_id) is None:
        return None
    for row in rows:
        tx.orm.add(row)
    tx.orm.flush()
    return rows


def append_version(tx: Tx, row: MemoryRecordRow) -> MemoryRecordRow | None:
    """`row` (version n+1) becomes current and version n is superseded, closed at the new
    one's time; None when version n is no longer the current active one (another change
    came first). Version n is locked first (PostgreSQL; SQLite has one writer), so a second
    change of it waits for the first and then finds it closed, rather than colliding on
    the primary key (which would leave its transaction unusable)."""
    previous = _locked(tx, row.id, row.version - 1)
    if previous is None or previous.status != ACTIVE or previous.memory_id != row.memory_id:
        return None
    # Each version is the held one for at least a millisecond, so `as_of` reaches every one.
    row.written_at_ms = max(row.written_at_ms, previous.written_at_ms + 1)
    previous.status = SUPERSEDED
    previous.invalidated_at_ms = row.written_at_ms
    tx.orm.add(previous)
    tx.orm.add(row)
    return row


def forget_record(tx: Tx, memory_id: str, record_id: str) -> MemoryRecordRow | None:
    """Closes the current version where it stands (§5.2): it stays in the chain, as
    forgotten. A record already forgotten stays as it was. The version is locked before it
    is closed, and if a revision closed it meanwhile, the one that revision wrote is."""
    row = current_record(tx, memory_id, record_id)
    while row is not None:
        locked = _locked(tx, row.id, row.version)
        if locked is None or locked.status != SUPERSEDED:
            break
        row = current_record(tx, memory_id, record_id)
    if row is None or row.status != ACTIVE:
        return row
    row.status = FORGOTTEN
    row.invalidated_at_ms = now_ms()
    tx.orm.add(row)
    return row


def _locked(tx: Tx, record_id: str, version: int) -> MemoryRecordRow | None:
    """The version, locked for this transaction and read as the last change committed."""
    return tx.orm.exec(
        select(MemoryRecordRow)
        .where(MemoryRecordRow.id == record_id, MemoryRecordRow.version == version)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).first()


def delete_records(tx: Tx, memory_ids: list[str]) -> None:
    """Every version of every record of these memories, for good."""
    tx.orm.exec(delete(MemoryRecordRow).where(col(MemoryRecordRow.memory_id).in_(memory_ids)))


def erase_records(tx: Tx, memory_id: str, record_ids: list[str]) -> list[str] | None:
    """Every version of each record, for good (§5.2); None, erasing nothing, when one of
    them is not a record of this memory."""
    found = set(
        tx.orm.exec(
            select(MemoryRecordRow.id).where(
                col(MemoryRecordRow.id).in_(record_ids), MemoryRecordRow.memory_id == memory_id
            )
        )
    )
    if found != set(record_ids):
        return None
    tx.orm.exec(
        delete(MemoryRecordRow).where(
            col(MemoryRecordRow.id).in_(record_ids), col(MemoryRecordRow.memory_id) == memory_id
        )
    )
    if tx.dialect.name == "sqlite":
        # The triggers took the versions out of the full-text index, but FTS5 keeps their
        # words in its segments until they are merged (SQLite 3.40 has no `secure-delete`
        # option): merged now, so the words are gone from the file too (the database's own
        # secure_delete zeroes the freed pages). It rewrites the whole index: erase is rare.
        tx.execute("INSERT INTO memory_record_fts (memory_record_fts) VALUES ('optimize')")
    return list(record_ids)


def records_by_ids(tx: Tx, record_ids: Iterable[str]) -> dict[str, MemoryRecordRow]:
    """The current version of each record named (a reference's target), by id."""
    ids = list(set(record_ids))
    if not ids:
        return {}
    rows = tx.orm.exec(
        select(MemoryRecordRow).where(
            col(MemoryRecordRow.id).in_(ids), col(MemoryRecordRow.status).in_(CURRENT)
        )
    )
    return {row.id: row for row in rows}


def _held_at(
    statement: SelectOfScalar[MemoryRecordRow], instant: int
) -> SelectOfScalar[MemoryRecordRow]:
    """The versions that were the held ones at `instant`: written by then, not yet closed."""
    return statement.where(
        col(MemoryRecordRow.written_at_ms) <= instant,
        or_(
            col(MemoryRecordRow.invalidated_at_ms).is_(None),
            col(MemoryRecordRow.invalidated_at_ms) > instant,
        ),
    )


# -- named queries (§6.4) ----------------------------------------------------------------------
def queries_of(tx: Tx, memory_id: str) -> list[MemoryQueryRow]:
    return list(
        tx.orm.exec(
            select(MemoryQueryRow)
            .where(MemoryQueryRow.memory_id == memory_id)
            .order_by(col(MemoryQueryRow.name))
        )
    )


def query_named(tx: Tx, memory_id: str, name: str) -> MemoryQueryRow | None:
    return tx.orm.get(MemoryQueryRow, (memory_id, name))


def put_query(tx: Tx, row: MemoryQueryRow) -> MemoryQueryRow | None:
    """Defines or replaces it; None when its memory went in the meantime."""
    if get_memory(tx, row.memory_id) is None:
        return None
    found = query_named(tx, row.memory_id, row.name)
    if found is None:
        try:
            with tx.orm.begin_nested():  # a savepoint: a lost race leaves the rest usable
                tx.orm.add(row)
            return row
        except IntegrityError:  # defined at the same moment: replace that one
            found = tx.orm.get(MemoryQueryRow, (row.memory_id, row.name), populate_existing=True)
            if found is None:
                return None
    for name in ("description", "params", "requires", "language", "body", "written_by"):
        setattr(found, name, getattr(row, name))
    found.updated_at_ms = row.updated_at_ms
    tx.orm.add(found)
    return found


# -- writes with an Idempotency-Key ------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    """Whether this request claimed its key (and runs), or what an earlier one left."""

    claimed: bool
    fingerprint: str = ""
    answer: dict[str, Any] | None = None


def claim_replay(
    tx: Tx, principal_id: str, key: str, fingerprint: str, expired: float, stale: float
) -> Claim:
    """Claims the key for this request, unless another holds it: a claim made before
    `expired` is forgotten, and one still unanswered since before `stale` (its request
    died) is taken over."""
    row = tx.orm.get(MemoryReplayRow, (principal_id, key))
    if row is not None and (
        row.created_at < expired or (row.answer is None and row.created_at < stale)
    ):
        tx.orm.delete(row)
        tx.orm.flush()
        row = None
    if row is not None:
        return Claim(False, row.fingerprint, row.answer)
    mine = MemoryReplayRow(
        principal_id=principal_id, key=key, fingerprint=fingerprint, created_at=time.time()
    )
    try:
        with tx.orm.begin_nested():  # a savepoint: a lost race leaves the rest usable
            tx.orm.add(mine)
    except IntegrityError:  # the same key, claimed at the same moment
        won = tx.orm.get(MemoryReplayRow, (principal_id, key), populate_existing=True)
        return Claim(False, won.fingerprint if won else "", won.answer if won else None)
    return Claim(True)


def settle_replay(tx: Tx, principal_id: str, key: str, answer: dict[str, Any]) -> None:
    row = tx.orm.get(MemoryReplayRow, (principal_id, key))
    if row is not None:
        row.answer = answer
        tx.orm.add(row)


def drop_replay(tx: Tx, principal_id: str, key: str) -> None:
    """A claimed write that was refused: nothing happened, so nothing is given again."""
    tx.orm.exec(
        delete(MemoryReplayRow).where(
            col(MemoryReplayRow.principal_id) == principal_id, col(MemoryReplayRow.key) == key
        )
    )


def prune_replays(tx: Tx, older_than: float) -> None:
    tx.orm.exec(delete(MemoryReplayRow).where(col(MemoryReplayRow.created_at) < older_than))


def now_ms() -> int:
    return int(time.time() * 1000)


def newest_stated(tx: Tx, memory_id: str, limit: int) -> list[MemoryRecordRow]:
    """A memory's current records other than episodes, newest first (what priming looks
    among: observed turns are many and are never primed)."""
    statement = (
        select(MemoryRecordRow)
        .where(
            MemoryRecordRow.memory_id == memory_id,
            MemoryRecordRow.status == ACTIVE,
            MemoryRecordRow.type != "episode",
        )
        .order_by(col(MemoryRecordRow.written_at_ms).desc(), col(MemoryRecordRow.id))
        .limit(limit)
    )
    return list(tx.orm.exec(statement))
