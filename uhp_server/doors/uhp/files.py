"""Files chapter: uploads in, artifacts out (listing, download, PDF preview, archive).

Artifacts are found by the engine by (container id, file id) and the caller's principal; no
client-supplied id ever reaches the filesystem, so there is nothing to traverse.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, StreamingResponse

from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.uploads import receive_upload
from uhp_server.doors.uhp.wire import artifact_to_wire, file_to_wire
from uhp_server.engine import Download
from uhp_server.errors import ApiError
from uhp_server.files.filenames import content_disposition
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute, reads_own_body

router = APIRouter(route_class=StrictJsonRoute)

# Artifacts are attacker-influenced (Security §3): never sniffed, never rendered in place,
# and sandboxed with no script should a browser display one anyway.
ARTIFACT_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "Cache-Control": "private, no-store",
    "Referrer-Policy": "no-referrer",
}


def download_response(download: Download) -> StreamingResponse:
    """The artifact's raw bytes, with its own media type, as a download."""
    artifact = download.artifact
    headers = {
        **ARTIFACT_HEADERS,
        "Content-Disposition": content_disposition(artifact.filename),
        "Content-Length": str(artifact.bytes),
    }
    return StreamingResponse(download.chunks, media_type=artifact.media_type, headers=headers)


@router.post("/v1/files")
@reads_own_body
async def upload_file(
    request: Request, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep
) -> dict[str, Any]:
    upload = await receive_upload(request, engine.files.new_upload, settings.max_file_bytes)
    kept = await engine.files.keep_upload(
        principal.id, upload.sink, upload.filename, upload.media_type, upload.purpose
    )
    return file_to_wire(kept)


@router.get("/v1/sessions/{session_id}/files")
async def list_session_files(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    artifacts = await engine.files.of_session(principal.id, session_id)
    return {"object": "list", "files": [artifact_to_wire(a) for a in artifacts]}


@router.get("/v1/sessions/{session_id}/files/archive")
async def session_archive(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> StreamingResponse:
    chunks = await engine.files.archive(principal.id, session_id)
    headers = {
        **ARTIFACT_HEADERS,
        "Content-Disposition": content_disposition(f"{session_id}.zip"),
    }
    return StreamingResponse(chunks, media_type="application/zip", headers=headers)


@router.get("/v1/containers/{container_id}/files/{file_id}/content")
async def download_artifact(
    container_id: str, file_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> StreamingResponse:
    return download_response(await engine.files.download(principal.id, container_id, file_id))


@router.get("/v1/containers/{container_id}/files/{file_id}/pdf")
async def preview_artifact(
    container_id: str, file_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> FileResponse:
    try:
        artifact, pdf = await engine.files.preview(principal.id, container_id, file_id)
    except ApiError as exc:
        if exc.status != 404:  # a conversion's own 501 or 502 is served like a preview
            exc.headers = {**ARTIFACT_HEADERS, **(exc.headers or {})}
        raise
    stem = artifact.filename.rsplit("/", 1)[-1].rsplit(".", 1)[0] or "preview"
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
