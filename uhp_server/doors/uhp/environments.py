"""Environments chapter (UHP 2026-09-28): the environment object, its source's files and
imports, builds and versions, the harnesses that name it, the runtimes and the package check.
Parsing and shapes only: the chapter is the engine's (`engine.environments`)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import FileResponse

from uhp_server.doors.deps import EngineDep
from uhp_server.engine import Environment, EnvironmentBuild, EnvironmentVersion
from uhp_server.errors import ApiError
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.bodies import declared_length, read_within
from uhp_server.http.strict_json import StrictJsonRoute, is_json, parse_strict, reads_own_body

router = APIRouter(route_class=StrictJsonRoute)

JsonObject = Annotated[dict[str, Any], Body()]
MAX_IMPORT_JSON = 64 * 1024  # a git import's JSON body
# A source file is the owner's, but it is served back to a browser as is: never sniffed,
# never run as a page.
FILE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "Cache-Control": "private, no-store",
}
_REPLACE = re.compile(r"^(0|1|true|false)$")


# -- shapes -------------------------------------------------------------------------------
def _seconds(moment: float | None) -> int | None:
    return None if moment is None else int(moment)


def version_to_wire(version: EnvironmentVersion) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "version": version.version,
        "status": version.status,
        "started_at": _seconds(version.started_at),
        "finished_at": _seconds(version.finished_at),
        "error": version.error,
        "files": version.files,
        "bytes": version.bytes,
        "packages": version.packages,
    }
    if version.status == "building":
        wire["stage"] = version.stage
    if version.collected:
        wire["collected"] = True  # retention removed its folder: the record only
    return wire


def environment_to_wire(environment: Environment) -> dict[str, Any]:
    build = environment.build
    return {
        "id": environment.id,
        "object": "environment",
        "name": environment.name,
        "slug": environment.slug,
        "description": environment.description,
        "entry": environment.entry,
        "status": environment.status,
        "mount": environment.mount,
        "version": environment.version,
        "latestVersion": environment.latest_version,
        "files": {"count": environment.files.count, "bytes": environment.files.bytes},
        "packages": [
            {"manager": p.manager, "name": p.name, "version": p.version}
            for p in environment.packages
        ],
        "declared": {
            manager: [{"spec": s.spec, "name": s.name, "version": s.version} for s in specs]
            for manager, specs in environment.declared.items()
        },
        "runtime": environment.runtime,
        "versions": [version_to_wire(v) for v in environment.versions],
        "build": None if build is None else version_to_wire(build),
        "createdAt": environment.created_at_ms,
        "updatedAt": environment.updated_at_ms,
    }


def build_to_wire(build: EnvironmentBuild) -> dict[str, Any]:
    version = build.version
    return {
        "id": build.environment_id,
        "object": "environment.build",
        **version_to_wire(version),
        "stage": version.stage,
        "log": build.log,
        "packages": [
            {"manager": p.manager, "name": p.name, "version": p.version} for p in build.packages
        ],
    }


# -- the object ---------------------------------------------------------------------------
@router.get("/v1/environments")
async def list_environments(principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    environments = await engine.environments.all(principal.id)
    return {"object": "list", "environments": [environment_to_wire(e) for e in environments]}


@router.post("/v1/environments")
async def create_environment(
    body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return environment_to_wire(await engine.environments.create(principal.id, body))


# Before /v1/environments/{environment_id}: these two paths are no environment's.
@router.get("/v1/environments/runtimes")
async def runtimes(principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    """What a build can be made with here, and nothing that is not there."""
    found = await engine.environments.runtimes()
    os_name, os_version = _os_parts(found.os)
    return {
        "object": "environment.runtimes",
        "python": list(found.python),
        "node": [found.node] if found.node else [],
        "os": {"name": os_name, "version": os_version},
        "apt": True,
    }


def _os_parts(described: str) -> tuple[str, str]:
    """("Debian GNU/Linux", "12 (bookworm)") of "Debian GNU/Linux 12 (bookworm)"."""
    found = re.search(r"\s(\d.*)$", described)
    if found is None:
        return described, ""
    return described[: found.start()].strip(), found.group(1)


@router.get("/v1/environments/packages/check")
async def check_package(
    principal: CurrentPrincipal, engine: EngineDep, manager: str = "", spec: str = ""
) -> dict[str, Any]:
    """What the manager's registry says about a spec, before any build."""
    check = await engine.environments.check_package(manager, spec)
    return {
        "object": "environment.package",
        "manager": check.manager,
        "name": check.name,
        "spec": check.spec,
        "exists": check.exists,
        "latest": check.latest,
        "version": check.version,
        "error": check.error,
    }


@router.get("/v1/environments/{environment_id}")
async def get_environment(
    environment_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return environment_to_wire(await engine.environments.get(principal.id, environment_id))


@router.put("/v1/environments/{environment_id}")
async def update_environment(
    environment_id: str, body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """Rename; description; entry; declared packages; runtime. The slug stays."""
    updated = await engine.environments.update(principal.id, environment_id, body)
    return environment_to_wire(updated)


@router.delete("/v1/environments/{environment_id}")
async def delete_environment(
    environment_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """Every version goes, folders included. Harnesses that named it keep the reference
    (their next task is refused environment_not_found): `detached_harnesses` names them."""
    deleted = await engine.environments.delete(principal.id, environment_id)
    return {
        "id": deleted.id,
        "object": "environment.deleted",
        "deleted": True,
        "detached_harnesses": [
            {"id": h.id, "name": h.name, "base": h.base} for h in deleted.detached
        ],
    }


@router.get("/v1/environments/{environment_id}/harnesses")
async def naming_harnesses(
    environment_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    found = await engine.environments.harnesses(principal.id, environment_id)
    return {
        "id": environment_id,
        "harnesses": [{"id": h.id, "name": h.name, "base": h.base} for h in found],
    }


# -- files --------------------------------------------------------------------------------
@router.get("/v1/environments/{environment_id}/files")
async def list_files(
    environment_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    entries, size = await engine.environments.tree(principal.id, environment_id)
    return {
        "object": "list",
        "entries": [
            {"path": e.path, "dir": e.dir, "bytes": e.bytes, "mtime": e.mtime} for e in entries
        ],
        "count": size.count,
        "bytes": size.bytes,
    }


@router.get("/v1/environments/{environment_id}/files/{path:path}")
async def get_file(
    environment_id: str, path: str, principal: CurrentPrincipal, engine: EngineDep
) -> FileResponse:
    found = await engine.environments.read_file(principal.id, environment_id, path)
    return FileResponse(found.path, media_type=found.media_type, headers=FILE_HEADERS)


@router.put("/v1/environments/{environment_id}/files/{path:path}")
@reads_own_body
async def put_file(
    environment_id: str,
    path: str,
    request: Request,
    principal: CurrentPrincipal,
    engine: EngineDep,
) -> dict[str, Any]:
    """The body is the file's bytes, exactly; the directories on its path are made."""
    written = await engine.environments.write_file(
        principal.id, environment_id, path, request.stream(), declared_length(request)
    )
    return {"path": path.strip("/"), "bytes": written, "dir": False}


@router.delete("/v1/environments/{environment_id}/files/{path:path}")
async def delete_file(
    environment_id: str, path: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    removed = await engine.environments.remove(principal.id, environment_id, path)
    return {"path": removed, "deleted": True}


@router.post("/v1/environments/{environment_id}/directories")
async def make_directory(
    environment_id: str, body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    made = await engine.environments.make_directory(principal.id, environment_id, body.get("path"))
    return {"path": made, "dir": True}


@router.post("/v1/environments/{environment_id}/import")
@reads_own_body
async def import_project(
    environment_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """A zip or a tar as the body (any content type but JSON), or JSON naming a git
    repository. `?replace=1` (or `"replace": true`) clears the source first."""
    replace = _replace_query(request)
    if is_json(request.headers.get("content-type", "")):
        raw = await read_within(request, MAX_IMPORT_JSON)
        if raw is None:
            raise ApiError(400, "invalid_input", "A git import's JSON body is at most 64 KiB.")
        try:
            body = parse_strict(raw)
        except ValueError as exc:
            raise ApiError(
                400, "invalid_input", f"The request body is not valid JSON: {exc}."
            ) from None
        if isinstance(body, dict) and replace and "replace" not in body:
            body = {**body, "replace": True}
        result = await engine.environments.import_git(principal.id, environment_id, body)
    else:
        result = await engine.environments.import_archive(
            principal.id, environment_id, request.stream(), declared_length(request), replace
        )
    return {
        "object": "environment.import",
        "written": result.written,
        "skipped": result.skipped,
        "count": result.count,
        "bytes": result.bytes,
    }


def _replace_query(request: Request) -> bool:
    value = request.query_params.get("replace", "0").lower()
    if not _REPLACE.match(value):
        raise ApiError(400, "invalid_input", "`replace` is 0 or 1.", param="replace")
    return value in ("1", "true")


# -- builds and versions -------------------------------------------------------------------
@router.post("/v1/environments/{environment_id}/build")
async def start_build(
    environment_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """Returns at once with the new version's record (`building`); poll it."""
    return build_to_wire(await engine.environments.build(principal.id, environment_id))


@router.get("/v1/environments/{environment_id}/builds/{version}")
async def get_build(
    environment_id: str, version: int, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    record = await engine.environments.build_record(principal.id, environment_id, version)
    return build_to_wire(record)


@router.get("/v1/environments/{environment_id}/versions")
async def list_versions(
    environment_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    active, versions = await engine.environments.versions(principal.id, environment_id)
    return {
        "id": environment_id,
        "object": "list",
        "active": active,
        "versions": [version_to_wire(v) for v in versions],
    }


@router.post("/v1/environments/{environment_id}/versions/{version}/activate")
async def activate_version(
    environment_id: str, version: int, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """Rollback by pointer: nothing is rebuilt."""
    activated = await engine.environments.activate(principal.id, environment_id, version)
    return environment_to_wire(activated)
