"""The files records name (Memories §4.3, §7): which version of which record names which
file (`POST /v1/files`), so the server keeps the bytes while one does and an erase can
remove those nothing else uses."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlmodel import col, delete, select

from storage import files as file_store
from storage.tables import FileRow, MemoryFileUseRow
from storage.unit import Tx


def file_of(tx: Tx, principal_id: str, file_id: str) -> FileRow | None:
    """A file the principal may name: one it uploaded and did not delete."""
    return file_store.get_file(tx, principal_id, file_id)


def kept_file(tx: Tx, file_id: str) -> FileRow | None:
    """A file a record names, whoever uploaded it: the reader's right is the record's."""
    row = tx.orm.get(FileRow, file_id)
    return None if row is None or row.deleted_at is not None else row


def record_uses(tx: Tx, uses: list[MemoryFileUseRow]) -> None:
    for use in uses:
        if tx.orm.get(MemoryFileUseRow, (use.record_id, use.version, use.file_id)) is None:
            tx.orm.add(use)


def files_of_records(tx: Tx, record_ids: list[str]) -> dict[str, set[str]]:
    """The files each record names in any of its versions."""
    found: dict[str, set[str]] = {}
    for record_id, file_id in tx.orm.exec(
        select(MemoryFileUseRow.record_id, MemoryFileUseRow.file_id).where(
            col(MemoryFileUseRow.record_id).in_(record_ids)
        )
    ):
        found.setdefault(record_id, set()).add(file_id)
    return found


@dataclass(frozen=True)
class Released:
    """What an erase left of the files its records named: the bytes to remove now (nothing
    uses them any more), and the files whose bytes stay (something else still names them)."""

    unused_blobs: list[str]
    still_kept: set[str]
    kept_records: list[str]  # the records released whose file stays readable elsewhere


def release_records(tx: Tx, record_ids: list[str]) -> Released:
    """The uses of these records dropped; each file no other record names is deleted, and
    its bytes are to be removed where no other file or artifact holds the same bytes."""
    named = files_of_records(tx, record_ids)
    tx.orm.exec(delete(MemoryFileUseRow).where(col(MemoryFileUseRow.record_id).in_(record_ids)))
    unused, kept = _release(tx, {file_id for files in named.values() for file_id in files})
    return Released(
        unused, kept, [record for record in record_ids if named.get(record, set()) & kept]
    )


def release_memories(tx: Tx, memory_ids: list[str]) -> Released:
    files = set(
        tx.orm.exec(
            select(MemoryFileUseRow.file_id).where(col(MemoryFileUseRow.memory_id).in_(memory_ids))
        )
    )
    tx.orm.exec(delete(MemoryFileUseRow).where(col(MemoryFileUseRow.memory_id).in_(memory_ids)))
    unused, kept = _release(tx, files)
    return Released(unused, kept, [])


def _release(tx: Tx, file_ids: set[str]) -> tuple[list[str], set[str]]:
    unused: list[str] = []
    kept: set[str] = set()
    for file_id in sorted(file_ids):
        still_named = tx.orm.exec(
            select(MemoryFileUseRow.record_id).where(MemoryFileUseRow.file_id == file_id)
        ).first()
        if still_named is not None:
            kept.add(file_id)
            continue
        row = tx.orm.get(FileRow, file_id)
        if row is None or row.deleted_at is not None:
            continue
        row.deleted_at = time.time()
        tx.orm.add(row)
        tx.orm.flush()
        if file_store.blob_in_use(tx, row.sha256):
            kept.add(file_id)  # the same bytes are another file's or an artifact's
        else:
            unused.append(row.sha256)
    return unused, kept
