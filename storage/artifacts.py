"""Artifacts: files turns produced, each a row pointing at a content-addressed blob."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import col, delete, select

from storage.tables import ArtifactRow
from storage.unit import Tx


def insert_artifacts(tx: Tx, rows: list[ArtifactRow]) -> None:
    tx.orm.add_all(rows)


def get_artifact(tx: Tx, principal_id: str, container_id: str, file_id: str) -> ArtifactRow | None:
    """The artifact addressed by (container, file), only if the caller owns it."""
    row = tx.orm.get(ArtifactRow, file_id)
    if row is None or row.principal_id != principal_id or row.container_id != container_id:
        return None
    return row


def for_session(tx: Tx, session_id: str) -> list[ArtifactRow]:
    """Every artifact of the session, over all its turns, oldest first."""
    return list(
        tx.orm.exec(
            select(ArtifactRow)
            .where(ArtifactRow.session_id == session_id)
            .order_by(col(ArtifactRow.created_at), col(ArtifactRow.filename))
        )
    )


def for_response(tx: Tx, response_id: str) -> list[ArtifactRow]:
    return list(
        tx.orm.exec(
            select(ArtifactRow)
            .where(ArtifactRow.response_id == response_id)
            .order_by(col(ArtifactRow.filename))
        )
    )


def session_totals(tx: Tx, session_id: str) -> tuple[int, int]:
    """(count, bytes) of the session's artifacts so far: what the per-session caps measure."""
    count, size = tx.orm.exec(
        select(func.count(), func.coalesce(func.sum(ArtifactRow.bytes), 0)).where(
            ArtifactRow.session_id == session_id
        )
    ).one()
    return int(count), int(size)


def delete_for_session(tx: Tx, session_id: str) -> list[str]:
    """Drop the session's artifact rows; returns the hashes they pointed at."""
    s = tx.orm
    hashes = list(s.exec(select(ArtifactRow.sha256).where(ArtifactRow.session_id == session_id)))
    s.exec(delete(ArtifactRow).where(col(ArtifactRow.session_id) == session_id))
    return sorted(set(hashes))


def to_wire(row: ArtifactRow) -> dict[str, object]:
    """The protocol's File object for an artifact."""
    return {
        "id": row.id,
        "object": "file",
        "container_id": row.container_id,
        "filename": row.filename,
        "bytes": row.bytes,
        "created_at": row.created_at,
        "media_type": row.media_type,
        "response_id": row.response_id,
    }
