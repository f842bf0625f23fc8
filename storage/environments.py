"""Environments and their builds (Environments §2, §4), scoped to their principal.

A build is a version row: inserted `building` when it starts (the next number after the
latest), written as each step ends, then `ready` or `failed` for good. The database decides
between two builds started at once: one version row per number, and no second build while one
is `building` (`start_build` answers None: environment_busy). The loser of such a race, or of
two creates of one slug, finds out in a savepoint, so that its unit stays usable and commits:
a failed flush outside one ends the unit's transaction (on PostgreSQL the failed statement
aborts it anyway), a 500 where a 409 is due. A ready build becomes the active version in the
same transaction that finishes it; a failed one changes nothing else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete, select

from storage.tables import EnvironmentRow, EnvironmentVersionRow, HarnessRow, SessionRow
from storage.unit import Tx

BUILDING, READY, FAILED = "building", "ready", "failed"


def get_environment(tx: Tx, principal_id: str, environment_id: str) -> EnvironmentRow | None:
    return tx.orm.exec(
        select(EnvironmentRow).where(
            EnvironmentRow.id == environment_id, EnvironmentRow.principal_id == principal_id
        )
    ).first()


def list_environments(tx: Tx, principal_id: str) -> list[EnvironmentRow]:
    return list(
        tx.orm.exec(
            select(EnvironmentRow)
            .where(EnvironmentRow.principal_id == principal_id)
            .order_by(col(EnvironmentRow.created_at_ms), col(EnvironmentRow.id))
        )
    )


def slug_taken(tx: Tx, principal_id: str, slug: str) -> bool:
    found = tx.orm.exec(
        select(EnvironmentRow.id).where(
            EnvironmentRow.principal_id == principal_id, EnvironmentRow.slug == slug
        )
    ).first()
    return found is not None


def insert_environment(tx: Tx, row: EnvironmentRow) -> EnvironmentRow | None:
    """The row, or None when its slug is the principal's other environment's (a race the
    unique index decides)."""
    if slug_taken(tx, row.principal_id, row.slug):
        return None
    try:
        with tx.orm.begin_nested():  # a savepoint: a lost race leaves the rest usable
            tx.orm.add(row)
    except IntegrityError:
        return None
    return row


def save_environment(tx: Tx, row: EnvironmentRow) -> EnvironmentRow:
    """Writes the row's client fields back (name, description, entry, declared, runtime)."""
    row.updated_at_ms = now_ms()
    tx.orm.add(row)
    return row


def delete_environment(tx: Tx, environment_id: str) -> bool:
    """Deletes the environment and every version record; False while a build runs."""
    if building_version(tx, environment_id) is not None:
        return False
    tx.orm.exec(
        delete(EnvironmentVersionRow).where(
            col(EnvironmentVersionRow.environment_id) == environment_id
        )
    )
    tx.orm.exec(delete(EnvironmentRow).where(col(EnvironmentRow.id) == environment_id))
    return True


def versions(tx: Tx, environment_id: str) -> list[EnvironmentVersionRow]:
    return list(
        tx.orm.exec(
            select(EnvironmentVersionRow)
            .where(EnvironmentVersionRow.environment_id == environment_id)
            .order_by(col(EnvironmentVersionRow.version))
        )
    )


def get_version(tx: Tx, environment_id: str, version: int) -> EnvironmentVersionRow | None:
    return tx.orm.get(EnvironmentVersionRow, (environment_id, version))


def building_version(tx: Tx, environment_id: str) -> int | None:
    return tx.orm.exec(
        select(EnvironmentVersionRow.version).where(
            EnvironmentVersionRow.environment_id == environment_id,
            EnvironmentVersionRow.status == BUILDING,
        )
    ).first()


def start_build(tx: Tx, environment_id: str) -> EnvironmentVersionRow | None:
    """The new version's record, `building`; None while another build runs. The record as
    started is what the caller answers with: read again later, the build may be over."""
    row = tx.orm.get(EnvironmentRow, environment_id)
    if row is None or building_version(tx, environment_id) is not None:
        return None
    version = (row.latest_version or 0) + 1
    try:
        with tx.orm.begin_nested():  # a savepoint: a lost race leaves the rest usable
            started = EnvironmentVersionRow(
                environment_id=environment_id,
                version=version,
                status=BUILDING,
                started_at=time.time(),
            )
            tx.orm.add(started)
            row.latest_version = version
            row.updated_at_ms = now_ms()
            tx.orm.add(row)
    except IntegrityError:  # another replica's build took the number first
        return None
    return started


def record_progress(tx: Tx, environment_id: str, version: int, stage: str, log: str) -> None:
    """A running build's step and its log so far (written as each step ends)."""
    record = get_version(tx, environment_id, version)
    if record is not None and record.status == BUILDING:
        record.stage, record.log = stage, log
        tx.orm.add(record)


@dataclass(frozen=True)
class BuildEnd:
    """How a build ended, as its record keeps it."""

    ready: bool
    log: str
    error: str = ""
    packages: tuple[dict[str, Any], ...] = ()
    files: int = 0
    size_bytes: int = 0


def finish_build(tx: Tx, environment_id: str, version: int, end: BuildEnd) -> bool:
    """Ends the build's record; a ready one becomes the active version at once. False for a
    build already over (or gone): it stays as it ended."""
    record = get_version(tx, environment_id, version)
    if record is None or record.status != BUILDING:
        return False
    record.status = READY if end.ready else FAILED
    record.stage = ""
    record.log, record.error = end.log, end.error
    record.packages = list(end.packages)
    record.files, record.size_bytes = end.files, end.size_bytes
    record.finished_at = time.time()
    tx.orm.add(record)
    environment = tx.orm.get(EnvironmentRow, environment_id)
    if environment is not None and end.ready:
        environment.active_version = version
        environment.updated_at_ms = now_ms()
        tx.orm.add(environment)
    return True


def activate(tx: Tx, environment_id: str, version: int) -> bool:
    """Makes a ready version the active one (a rollback is this); False for any other."""
    record = get_version(tx, environment_id, version)
    environment = tx.orm.get(EnvironmentRow, environment_id)
    if record is None or record.status != READY or environment is None:
        return False
    environment.active_version = version
    environment.updated_at_ms = now_ms()
    tx.orm.add(environment)
    return True


def activate_kept(tx: Tx, environment_id: str, version: int) -> bool:
    """`activate`, for a version whose folder retention has not collected."""
    record = get_version(tx, environment_id, version)
    if record is None or record.collected_at is not None:
        return False
    return activate(tx, environment_id, version)


def collect(tx: Tx, environment_id: str, candidates: list[int]) -> list[int]:
    """Marks as collected those of `candidates` nothing reads now (checked again here, in the
    transaction that marks them, against a session or an activation since they were chosen);
    the versions whose folders may now go."""
    in_use = versions_in_use(tx, environment_id)
    marked = []
    for version in candidates:
        record = get_version(tx, environment_id, version)
        if record is None or record.status == BUILDING or version in in_use:
            continue
        if record.collected_at is None:
            record.collected_at = time.time()
            tx.orm.add(record)
        marked.append(version)
    return marked


def environment_ids(tx: Tx) -> list[str]:
    """Every environment's id, of every principal (retention's sweep at start-up)."""
    return list(tx.orm.exec(select(EnvironmentRow.id)))


def abandon_builds(tx: Tx) -> list[tuple[str, int]]:
    """At start-up: the builds a stopped server left `building` end `failed` (their process
    is gone with it). The (environment, version) of each."""
    left = list(
        tx.orm.exec(select(EnvironmentVersionRow).where(EnvironmentVersionRow.status == BUILDING))
    )
    for record in left:
        record.status, record.stage = FAILED, ""
        record.error = "The server stopped while this build ran."
        record.finished_at = time.time()
        tx.orm.add(record)
    return [(record.environment_id, record.version) for record in left]


def harnesses_naming(tx: Tx, principal_id: str, environment_id: str) -> list[HarnessRow]:
    """The principal's live harnesses whose config names the environment."""
    rows = tx.orm.exec(
        select(HarnessRow).where(
            HarnessRow.principal_id == principal_id, col(HarnessRow.deleted_at).is_(None)
        )
    )
    return [row for row in rows if (row.config or {}).get("environment") == environment_id]


def versions_in_use(tx: Tx, environment_id: str) -> set[int]:
    """The versions something still reads: the active one and every live session's."""
    environment = tx.orm.get(EnvironmentRow, environment_id)
    used = {environment.active_version} if environment and environment.active_version else set()
    rows = tx.orm.exec(
        select(SessionRow.environment_version).where(
            SessionRow.environment_id == environment_id, col(SessionRow.deleted_at).is_(None)
        )
    )
    used.update(version for version in rows if version is not None)
    return used


def now_ms() -> int:
    return int(time.time() * 1000)
