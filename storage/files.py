"""Input files: uploads (POST /v1/files) and inlined files, scoped to their principal."""

from __future__ import annotations

from sqlmodel import col, select

from storage.db import Database
from storage.models import ArtifactRow, FileRow


def insert_file(db: Database, row: FileRow) -> FileRow:
    with db.session() as s:
        s.add(row)
        s.commit()
        return row


def get_file(db: Database, principal_id: str, file_id: str) -> FileRow | None:
    with db.session() as s:
        row = s.get(FileRow, file_id)
        if row is None or row.principal_id != principal_id or row.deleted_at is not None:
            return None
        return row


def blob_in_use(db: Database, sha256: str) -> bool:
    """Whether any file or artifact still points at these bytes (so they must stay)."""
    with db.session() as s:
        used_by_file = s.exec(
            select(FileRow.id).where(FileRow.sha256 == sha256, col(FileRow.deleted_at).is_(None))
        ).first()
        used_by_artifact = s.exec(
            select(ArtifactRow.id).where(ArtifactRow.sha256 == sha256)
        ).first()
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
