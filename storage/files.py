"""Input files: uploads (POST /v1/files) and inlined files, scoped to their principal."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlmodel import col, select

from storage.inserts import Insert
from storage.tables import ArtifactRow, FileRow
from storage.unit import Tx


@dataclass(frozen=True)
class InputFile:
    """A file a task sent inline (its blob already stored)."""

    id: str
    filename: str
    size: int
    media_type: str
    sha256: str


def insert_file(tx: Tx, row: FileRow) -> FileRow:
    tx.orm.add(row)
    return row


def input_files(principal_id: str, files: list[InputFile]) -> Insert:
    """A task's inline files as the principal's File objects."""
    now = int(time.time())
    return Insert(
        "file",
        (
            "id",
            "principal_id",
            "filename",
            "bytes",
            "media_type",
            "sha256",
            "purpose",
            "created_at",
        ),
        [
            (f.id, principal_id, f.filename, f.size, f.media_type, f.sha256, "input", now)
            for f in files
        ],
    )


def insert_inputs(tx: Tx, principal_id: str, files: list[InputFile]) -> None:
    """Store a task's inline files as the principal's File objects."""
    if files:
        input_files(principal_id, files).run(tx)


def get_file(tx: Tx, principal_id: str, file_id: str) -> FileRow | None:
    row = tx.orm.get(FileRow, file_id)
    if row is None or row.principal_id != principal_id or row.deleted_at is not None:
        return None
    return row


def blob_in_use(tx: Tx, sha256: str) -> bool:
    """Whether any file or artifact still points at these bytes (so they must stay)."""
    s = tx.orm
    used_by_file = s.exec(
        select(FileRow.id).where(FileRow.sha256 == sha256, col(FileRow.deleted_at).is_(None))
    ).first()
    used_by_artifact = s.exec(select(ArtifactRow.id).where(ArtifactRow.sha256 == sha256)).first()
    return used_by_file is not None or used_by_artifact is not None


def to_wire(row: FileRow) -> dict[str, object]:
    """The protocol's File object."""
    return {
        "id": row.id,
        "object": "file",
        "filename": row.filename,
        "bytes": row.bytes,
        "created_at": row.created_at,
        "purpose": row.purpose,
        "media_type": row.media_type,
    }
