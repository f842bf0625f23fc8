"""The principal's environments in the console: the list and creating one; an environment's
page with its source's files (listed, viewed, uploaded or replaced, deleted), its builds
(started, and a running one followed stage by stage as its log grows), its versions
(activated, or an older one activated again: a rollback) and deleting it.

Every call is the one the `/v1/environments` routes make (`engine.environments`), for the
visitor's principal: another principal's environment id is the engine's
`environment_not_found`, the same 404 page as an id that is not there."""

from __future__ import annotations

import asyncio
import codecs
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from itertools import islice
from typing import IO, Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from uhp_server.doors.console import guard
from uhp_server.doors.console.guard import PREFIX
from uhp_server.doors.console.pages import ConsoleRoute, see_other
from uhp_server.doors.console.render import PAGE_HEADERS, page
from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.environments import FILE_HEADERS
from uhp_server.doors.uhp.share_page.render import human_size, when
from uhp_server.doors.uhp.uploads import receive_upload
from uhp_server.engine import Engine, Environment, EnvironmentBuild, EnvironmentVersion
from uhp_server.errors import ApiError
from uhp_server.files.filenames import content_disposition

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

ENVIRONMENTS = PREFIX + "/environments"
TEXT_PREVIEW_BYTES = 256 * 1024  # past this, the first part and a note
MAX_PATH = 1024
FILES_SHOWN = 1000  # a source's files listed on its page; the rest through the API
# The stages a build goes through, in order (Environments chapter; docs/environments.md):
# the page shows each as done, running or still to come.
STAGES = (
    "queued",
    "copying files",
    "python packages",
    "node packages",
    "system packages",
    "setup.sh",
    "finishing",
)
SPOOL_BYTES = 1024 * 1024  # an upload past this waits on disk, not in memory


def environment_url(environment_id: str) -> str:
    return f"{ENVIRONMENTS}/{environment_id}"


def build_url(environment_id: str, version: int) -> str:
    return f"{environment_url(environment_id)}/builds/{version}"


def file_url(environment_id: str, path: str) -> str:
    return f"{environment_url(environment_id)}/files/{quote(path)}"


# -- the list -------------------------------------------------------------------------------
@router.get(ENVIRONMENTS)
async def environment_list(request: Request, engine: EngineDep) -> Response:
    visitor = await guard.visitor(request)
    found = await engine.environments.all(visitor.principal.id)
    rows = [_row(e) for e in sorted(found, key=lambda e: e.name.lower())]
    return page("environments.html", visitor=visitor, section="environments", rows=rows)


def _row(environment: Environment) -> dict[str, Any]:
    return {
        "url": environment_url(environment.id),
        "name": environment.name,
        "status": environment.status,
        "version": environment.version,
        "files": environment.files.count,
        "size": human_size(environment.files.bytes),
        "mount": environment.mount,
    }


@router.post(ENVIRONMENTS)
async def create_environment(
    request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, fields = await guard.checked_write(request, settings)
    body = {
        "name": fields.get("name", "").strip(),
        "description": fields.get("description", "").strip(),
    }
    created = await engine.environments.create(visitor.principal.id, body)
    return see_other(environment_url(created.id))


# -- one environment ------------------------------------------------------------------------
@router.get(ENVIRONMENTS + "/{environment_id}")
async def environment_page(environment_id: str, request: Request, engine: EngineDep) -> Response:
    visitor = await guard.visitor(request)
    environment = await engine.environments.get(visitor.principal.id, environment_id)
    entries, size = await engine.environments.tree(visitor.principal.id, environment.id)
    harnesses = await engine.environments.harnesses(visitor.principal.id, environment.id)
    files = [
        {
            "path": e.path,
            "size": human_size(e.bytes),
            "url": file_url(environment.id, e.path),
        }
        for e in islice((e for e in entries if not e.dir), FILES_SHOWN)
    ]
    return page(
        "environment.html",
        visitor=visitor,
        section="environments",
        environment=environment,
        files=files,
        count=size.count,
        total=human_size(size.bytes),
        versions=_versions(environment),
        harnesses=harnesses,
        building=environment.build is not None and environment.build.status == "building",
        packages=environment.packages,
    )


def _versions(environment: Environment) -> list[dict[str, Any]]:
    """Newest first, each with what may be done with it: a finished build that is not the
    active one may be activated (an older one: rolled back to)."""
    rows = []
    for version in reversed(environment.versions):
        active = version.version == environment.version
        usable = version.status == "ready" and not version.collected and not active
        older = environment.version is not None and version.version < environment.version
        rows.append(
            {
                "version": version.version,
                "status": version.status,
                "active": active,
                "started": when(version.started_at),
                "finished": when(version.finished_at) if version.finished_at else "",
                "files": version.files,
                "packages": version.packages,
                "collected": version.collected,
                "error": version.error,
                "action": ("Roll back to" if older else "Activate") if usable else None,
                "url": build_url(environment.id, version.version),
            }
        )
    return rows


@router.post(ENVIRONMENTS + "/{environment_id}/delete")
async def delete_environment(
    environment_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    await engine.environments.delete(visitor.principal.id, environment_id)
    return see_other(ENVIRONMENTS)


# -- files ----------------------------------------------------------------------------------
@router.get(ENVIRONMENTS + "/{environment_id}/files/{path:path}")
async def file_page(
    environment_id: str, path: str, request: Request, engine: EngineDep
) -> Response:
    """The file's text, escaped (the first 256 KB), or a note that it is not text; its
    download, and the forms to replace or delete it."""
    visitor = await guard.visitor(request)
    environment = await engine.environments.get(visitor.principal.id, environment_id)
    found = await engine.environments.read_file(visitor.principal.id, environment.id, path)
    text, cut, binary = await asyncio.to_thread(_text_of, found.path)
    return page(
        "environment_file.html",
        visitor=visitor,
        section="environments",
        environment=environment,
        path=path,
        size=human_size(found.size),
        media_type=found.media_type,
        text=text,
        cut=cut,
        binary=binary,
        download=f"{environment_url(environment.id)}/raw/{quote(path)}",
    )


def _text_of(path: Any) -> tuple[str, bool, bool]:
    """The file's first part as text, whether it was cut, and whether it looks binary (a NUL
    among its first bytes): a binary file is offered as a download only."""
    with open(path, "rb") as opened:
        head = opened.read(TEXT_PREVIEW_BYTES + 1)
    if b"\0" in head[:8192]:
        return "", False, True
    cut = len(head) > TEXT_PREVIEW_BYTES
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return decoder.decode(head[:TEXT_PREVIEW_BYTES], final=not cut), cut, False


@router.get(ENVIRONMENTS + "/{environment_id}/raw/{path:path}")
async def raw_file(environment_id: str, path: str, request: Request, engine: EngineDep) -> Response:
    """The file's bytes as `GET /v1/environments/{id}/files/{path}` serves them: an
    attachment, never sniffed, in a CSP sandbox (a page in the source never runs here)."""
    visitor = await guard.visitor(request)
    found = await engine.environments.read_file(visitor.principal.id, environment_id, path)
    name = path.rsplit("/", 1)[-1] or "file"
    headers = {
        **PAGE_HEADERS,
        **FILE_HEADERS,
        "Content-Disposition": content_disposition(name),
    }
    return FileResponse(found.path, media_type=found.media_type, headers=headers)


class _Spool:
    """Where a form's file waits while the rest of the form arrives (its CSRF token may come
    after it): the engine's write_file then reads it back, within the environment's limits.
    An UploadSink, as receive_upload takes."""

    def __init__(self) -> None:
        # Closed by discard(), which every path through the upload calls.
        self.file: IO[bytes] | None = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def write(self, chunk: bytes) -> None:
        if self.file is not None:
            self.file.write(chunk)
            self._size += len(chunk)

    def discard(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    async def chunks(self) -> AsyncIterator[bytes]:
        assert self.file is not None
        self.file.seek(0)
        while chunk := self.file.read(64 * 1024):
            yield chunk


@dataclass(frozen=True)
class _Received:
    path: str
    spool: _Spool


def _target(fields: dict[str, str], filename: str) -> str:
    """Where the file goes: the form's path (a folder ending in `/` takes the file's name),
    else the file's own name at the root."""
    path = fields.get("path", "").strip()
    if not path or path.endswith("/"):
        path = path + filename
    if len(path) > MAX_PATH or not path.isprintable():
        raise ApiError(400, "invalid_input", "That path is not valid.")
    return path


async def _received(
    request: Request, engine: Engine, settings: SettingsDep, csrf_token: str
) -> _Received:
    """The uploaded file, its Origin checked before a byte is kept and its token once the
    form is read (a refused upload is dropped)."""
    guard.check_origin(request, settings)
    spool = _Spool()
    limit = engine.environments.limits.max_file_bytes
    upload = await receive_upload(request, lambda: spool, limit)
    try:
        guard.check_token(upload.fields.get(guard.CSRF_FIELD), csrf_token)
        return _Received(_target(upload.fields, upload.filename), spool)
    except Exception:
        spool.discard()
        raise


@router.post(ENVIRONMENTS + "/{environment_id}/files")
async def upload_file(
    environment_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    """A file uploaded, or one replaced (the same path), as `PUT …/files/{path}` writes it."""
    visitor = await guard.visitor(request)
    guard.check_origin(request, settings)  # before anything is looked up or read
    await engine.environments.get(visitor.principal.id, environment_id)
    received = await _received(request, engine, settings, visitor.csrf_token)
    try:
        await engine.environments.write_file(
            visitor.principal.id,
            environment_id,
            received.path,
            received.spool.chunks(),
            received.spool.size,
        )
    finally:
        received.spool.discard()
    return see_other(file_url(environment_id, received.path.strip("/")))


@router.post(ENVIRONMENTS + "/{environment_id}/files-delete")
async def delete_file(
    environment_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, fields = await guard.checked_write(request, settings)
    path = fields.get("path", "")
    if not path:
        raise ApiError(400, "invalid_input", "Say which file to delete.")
    await engine.environments.remove(visitor.principal.id, environment_id, path)
    return see_other(environment_url(environment_id))


# -- builds and versions --------------------------------------------------------------------
@router.post(ENVIRONMENTS + "/{environment_id}/build")
async def start_build(
    environment_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    started = await engine.environments.build(visitor.principal.id, environment_id)
    return see_other(build_url(environment_id, started.version.version))


def _stages(version: EnvironmentVersion) -> list[dict[str, str]]:
    """While a build runs, each stage as done, current or to come (a stage with nothing to
    install is passed over); a finished build's stages are its log's."""
    if version.status != "building":
        return []
    current = STAGES.index(version.stage) if version.stage in STAGES else -1
    return [
        {
            "name": name,
            "state": "done" if index < current else ("current" if index == current else "todo"),
        }
        for index, name in enumerate(STAGES)
    ]


def build_state(build: EnvironmentBuild) -> dict[str, Any]:
    """What the build page shows and polls: its status, stage, stages, log and packages."""
    version = build.version
    return {
        "status": version.status,
        "running": version.status == "building",
        "stage": version.stage,
        "stages": _stages(version),
        "error": version.error,
        "log": build.log,
        "finished": when(version.finished_at) if version.finished_at else "",
        "packages": [
            {"manager": p.manager, "name": p.name, "version": p.version} for p in build.packages
        ],
    }


@router.get(ENVIRONMENTS + "/{environment_id}/builds/{version}")
async def build_page(
    environment_id: str, version: int, request: Request, engine: EngineDep
) -> Response:
    visitor = await guard.visitor(request)
    environment = await engine.environments.get(visitor.principal.id, environment_id)
    build = await engine.environments.build_record(visitor.principal.id, environment.id, version)
    return page(
        "environment_build.html",
        visitor=visitor,
        section="environments",
        environment=environment,
        version=version,
        started=when(build.version.started_at),
        state=build_state(build),
    )


@router.get(ENVIRONMENTS + "/{environment_id}/builds/{version}/state")
async def build_live_state(
    environment_id: str, version: int, request: Request, engine: EngineDep
) -> Response:
    """What the build page polls while the build runs (`GET …/builds/{version}`'s record)."""
    visitor = await guard.visitor(request)
    build = await engine.environments.build_record(visitor.principal.id, environment_id, version)
    return JSONResponse(build_state(build), headers=PAGE_HEADERS)


@router.post(ENVIRONMENTS + "/{environment_id}/versions/{version}/activate")
async def activate_version(
    environment_id: str, version: int, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    """Activate a finished build, or roll back to an older one: a pointer, nothing rebuilt."""
    visitor, _ = await guard.checked_write(request, settings)
    await engine.environments.activate(visitor.principal.id, environment_id, version)
    return see_other(environment_url(environment_id))
