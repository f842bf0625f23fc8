"""A session's files in the console: the list, a preview (text shown escaped, a raster
image shown as an image, a PDF or office document through the server's PDF preview), and
the download. Each reads the artifact through the engine for the visitor's principal."""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from itertools import islice

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response, StreamingResponse

from uhp_server.doors.console import guard
from uhp_server.doors.console.guard import PREFIX, Visitor
from uhp_server.doors.console.pages import ConsoleRoute
from uhp_server.doors.console.render import page
from uhp_server.doors.deps import EngineDep
from uhp_server.doors.uhp.files import ARTIFACT_HEADERS
from uhp_server.doors.uhp.share_page.render import human_size
from uhp_server.engine import Artifact, Session
from uhp_server.files.filenames import content_disposition

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

FILES = PREFIX + "/sessions/{session_id}/files/{file_id}"
TEXT_PREVIEW_BYTES = 256 * 1024  # past this, the first part and a note
# Shown as an image: raster formats only. SVG is a document that can carry script; it is
# offered as a download (or a PDF preview), never drawn on the console's page.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
TEXT_TYPES = ("application/json", "application/xml", "application/javascript")
PDF_SOURCES = (
    "application/pdf",
    "application/vnd.openxmlformats",
    "application/msword",
    "application/vnd.ms-",
    "application/vnd.oasis.opendocument",
    "text/csv",
)


def kind_of(artifact: Artifact) -> str:
    """How the console previews it: "image", "text", "pdf" (the PDF preview) or "none"."""
    media = artifact.media_type.split(";")[0].strip().lower()
    if media in IMAGE_TYPES:
        return "image"
    if media.startswith(PDF_SOURCES):
        return "pdf"
    if media.startswith("text/") or media in TEXT_TYPES or media.endswith(("+json", "+xml")):
        return "text"
    return "none"


def _text_of(chunks: Iterable[bytes], limit: int) -> tuple[str, bool]:
    """The first `limit` bytes as text (undecodable bytes replaced), and whether it was cut."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text, taken = [], 0
    for chunk in chunks:
        piece = chunk[: limit - taken]
        text.append(decoder.decode(piece))
        taken += len(piece)
        if taken >= limit:
            return "".join(text), True
    text.append(decoder.decode(b"", final=True))
    return "".join(text), False


async def _artifact(
    request: Request, engine: EngineDep, session_id: str, file_id: str
) -> tuple[Visitor, Session, Artifact]:
    visitor = await guard.visitor(request)
    session = await engine.sessions.get(visitor.principal.id, session_id)
    artifact = await engine.files.artifact(visitor.principal.id, session.container_id, file_id)
    return visitor, session, artifact


@router.get(FILES + "/preview")
async def preview_page(
    session_id: str, file_id: str, request: Request, engine: EngineDep
) -> Response:
    visitor, session, artifact = await _artifact(request, engine, session_id, file_id)
    kind = kind_of(artifact)
    text, cut = ("", False)
    if kind == "text":
        download = await engine.files.download(visitor.principal.id, session.container_id, file_id)
        text, cut = _text_of(download.chunks, TEXT_PREVIEW_BYTES)
    return page(
        "file.html",
        visitor=visitor,
        section="sessions",
        session=session,
        file=artifact,
        size=human_size(artifact.bytes),
        kind=kind,
        text=text,
        cut=cut,
        base=f"{PREFIX}/sessions/{session.id}/files/{artifact.id}",
    )


@router.get(FILES + "/image")
async def image(session_id: str, file_id: str, request: Request, engine: EngineDep) -> Response:
    """A raster image's bytes, inline, for the preview's <img>; nothing else is served so."""
    visitor, session, artifact = await _artifact(request, engine, session_id, file_id)
    if kind_of(artifact) != "image":
        return Response(status_code=404, headers=ARTIFACT_HEADERS)
    download = await engine.files.download(visitor.principal.id, session.container_id, file_id)
    headers = {
        **ARTIFACT_HEADERS,
        "Content-Disposition": content_disposition(artifact.filename).replace(
            "attachment", "inline", 1
        ),
        "Content-Length": str(artifact.bytes),
    }
    media = artifact.media_type.split(";")[0].strip().lower()
    return StreamingResponse(download.chunks, media_type=media, headers=headers)


@router.get(FILES + "/pdf")
async def pdf_preview(
    session_id: str, file_id: str, request: Request, engine: EngineDep
) -> Response:
    """The server's PDF preview of the file, as `GET /v1/containers/…/pdf` serves it: inline,
    in a CSP sandbox (an opaque origin, no script)."""
    visitor, session, artifact = await _artifact(request, engine, session_id, file_id)
    _, pdf = await engine.files.preview(visitor.principal.id, session.container_id, file_id)
    stem = artifact.filename.rsplit("/", 1)[-1].rsplit(".", 1)[0] or "preview"
    headers = {
        **ARTIFACT_HEADERS,
        "Content-Disposition": content_disposition(f"{stem}.pdf").replace(
            "attachment", "inline", 1
        ),
    }
    return FileResponse(pdf, media_type="application/pdf", headers=headers)


def files_list(session_id: str, artifacts: list[Artifact]) -> list[dict[str, str]]:
    """The session's files for its page: name, size, and where to preview and download."""
    base = f"{PREFIX}/sessions/{session_id}/files"
    return [
        {
            "name": a.filename,
            "size": human_size(a.bytes),
            "preview": f"{base}/{a.id}/preview",
            "download": f"{base}/{a.id}",
        }
        for a in islice(artifacts, 500)
    ]
