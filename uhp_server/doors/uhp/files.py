"""Files chapter: uploads in, artifacts out (listing, download, PDF preview, archive).

Every artifact is looked up in the database by (container id, file id) and the caller's
principal; a path is only ever built from the content hash stored with it. No client-supplied
id ever reaches the filesystem, so there is nothing to traverse.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, StreamingResponse

from storage import artifacts as artifact_store
from storage import files as file_store
from storage import sessions as session_store
from storage.blobs import BlobStore
from storage.tables import ArtifactRow, FileRow, Principal, SessionRow
from storage.unit import Tx
from uhp_server.context import AppContext, Ctx
from uhp_server.errors import ApiError
from uhp_server.files.archive import zip_stream
from uhp_server.files.filenames import content_disposition
from uhp_server.files.uploads import receive_upload
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute, reads_own_body
from uhp_server.ids import new_id

router = APIRouter(route_class=StrictJsonRoute)

# Artifacts are attacker-influenced (Security §3): never sniffed, never rendered in place,
# and sandboxed with no script should a browser display one anyway.
ARTIFACT_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "Cache-Control": "private, no-store",
    "Referrer-Policy": "no-referrer",
}


def session_or_404(tx: Tx, ctx: AppContext, principal: Principal, session_id: str) -> SessionRow:
    session = session_store.get_session(tx, principal.id, session_id)
    if session is None:
        raise ApiError(404, "session_not_found", "No session with that id.")
    return session


def artifact_or_404(
    tx: Tx, ctx: AppContext, principal: Principal, container_id: str, file_id: str
) -> ArtifactRow:
    row = artifact_store.get_artifact(tx, principal.id, container_id, file_id)
    # An artifact of a deleted session is gone too (Files §5).
    if (
        row is None
        or session_store.get_session(tx, principal.id, row.session_id) is None
        or not ctx.blobs.exists(row.sha256)
    ):
        raise ApiError(404, "file_not_found", "No file with that id in that container.")
    return row


def blob_response(blobs: BlobStore, row: ArtifactRow) -> StreamingResponse:
    """The artifact's raw bytes, with its own media type, as a download."""
    headers = {
        **ARTIFACT_HEADERS,
        "Content-Disposition": content_disposition(row.filename),
        "Content-Length": str(row.bytes),
    }
    return StreamingResponse(
        blobs.read_chunks(row.sha256), media_type=row.media_type, headers=headers
    )


@router.post("/v1/files")
@reads_own_body
async def upload_file(request: Request, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    upload = await receive_upload(request, ctx.blobs, ctx.settings.max_file_bytes)
    row = await ctx.db.write(
        file_store.insert_file,
        FileRow(
            id=new_id("file"),
            principal_id=principal.id,
            filename=upload.filename,
            bytes=upload.size,
            media_type=upload.media_type,
            sha256=upload.sha256,
            purpose=upload.purpose,
            created_at=int(time.time()),
        ),
    )
    return file_store.to_wire(row)


@router.get("/v1/sessions/{session_id}/files")
def list_session_files(session_id: str, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    session = ctx.db.run(session_or_404, ctx, principal, session_id)
    rows = ctx.db.run(artifact_store.for_session, session.id)
    return {"object": "list", "files": [artifact_store.to_wire(row) for row in rows]}


@router.get("/v1/sessions/{session_id}/files/archive")
def session_archive(session_id: str, principal: CurrentPrincipal, ctx: Ctx) -> StreamingResponse:
    session = ctx.db.run(session_or_404, ctx, principal, session_id)
    rows = ctx.db.run(artifact_store.for_session, session.id)
    chunks: Iterator[bytes] = zip_stream(rows, ctx.blobs)
    headers = {
        **ARTIFACT_HEADERS,
        "Content-Disposition": content_disposition(f"{session.id}.zip"),
    }
    return StreamingResponse(chunks, media_type="application/zip", headers=headers)


@router.get("/v1/containers/{container_id}/files/{file_id}/content")
def download_artifact(
    container_id: str, file_id: str, principal: CurrentPrincipal, ctx: Ctx
) -> StreamingResponse:
    return blob_response(
        ctx.blobs, ctx.db.run(artifact_or_404, ctx, principal, container_id, file_id)
    )


@router.get("/v1/containers/{container_id}/files/{file_id}/pdf")
async def preview_artifact(
    container_id: str, file_id: str, principal: CurrentPrincipal, ctx: Ctx
) -> FileResponse:
    row = await ctx.db.read(artifact_or_404, ctx, principal, container_id, file_id)
    try:
        pdf = await ctx.previews.pdf(row)
    except ApiError as exc:
        exc.headers = {**ARTIFACT_HEADERS, **(exc.headers or {})}
        raise
    stem = row.filename.rsplit("/", 1)[-1].rsplit(".", 1)[0] or "preview"
    # Inline, since a preview is for reading, but hardened exactly like a download: a PDF
    # artifact is served as the agent wrote it (scripts, forms, links included), and even a
    # converted one renders attacker-chosen content. The CSP sandbox gives it an opaque
    # origin with no script, so it can never act as this server's origin.
    headers = {
        **ARTIFACT_HEADERS,
        "Content-Disposition": content_disposition(f"{stem}.pdf").replace(
            "attachment", "inline", 1
        ),
    }
    return FileResponse(pdf, media_type="application/pdf", headers=headers)
