"""From the database's rows to the records a door sees (facade/records.py): what a door may
know of each, copied, so that no row (nor a change of storage) ever reaches a door."""

from __future__ import annotations

from storage.tables import ArtifactRow, FileRow, Principal, SessionRow, ShareRow
from uhp_server.engine.facade import records


def principal(row: Principal) -> records.Principal:
    return records.Principal(row.id, row.name)


def session(row: SessionRow) -> records.Session:
    return records.Session(
        id=row.id,
        principal_id=row.principal_id,
        harness_id=row.harness_id,
        container_id=row.container_id,
        title=row.title,
        status=row.status,
        created_at=row.created_at,
        updated_at=row.updated_at,
        active_response_id=row.active_response_id,
        environment_id=row.environment_id,
        environment_version=row.environment_version,
    )


def uploaded_file(row: FileRow) -> records.UploadedFile:
    return records.UploadedFile(
        id=row.id,
        filename=row.filename,
        bytes=row.bytes,
        media_type=row.media_type,
        purpose=row.purpose,
        created_at=row.created_at,
    )


def artifact(row: ArtifactRow) -> records.Artifact:
    return records.Artifact(
        id=row.id,
        session_id=row.session_id,
        container_id=row.container_id,
        response_id=row.response_id,
        filename=row.filename,
        bytes=row.bytes,
        media_type=row.media_type,
        sha256=row.sha256,
        created_at=row.created_at,
    )


def share(row: ShareRow) -> records.Share:
    return records.Share(row.id, row.session_id, row.token, row.created_at)
