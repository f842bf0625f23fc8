"""Harnesses chapter: discovering configured harnesses and the models they can run, and
(class Full) creating, replacing and deleting them (Harnesses §5); a plugin's files and a
harness exported as a plugin (Plugins §3.1, §5)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from uhp_server.doors.deps import EngineDep
from uhp_server.doors.uhp.wire import harness_to_wire
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute)

JsonObject = Annotated[dict[str, Any], Body()]


@router.get("/v1/harnesses")
async def list_harnesses(principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    harnesses = await engine.harnesses.all(principal.id)
    return {"object": "list", "harnesses": [harness_to_wire(h) for h in harnesses]}


@router.post("/v1/harnesses")
async def create_harness(
    body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return harness_to_wire(await engine.harnesses.create(principal.id, body))


@router.get("/v1/harnesses/{harness_id}")
async def get_harness(
    harness_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return harness_to_wire(await engine.harnesses.get(principal.id, harness_id))


@router.put("/v1/harnesses/{harness_id}")
async def replace_harness(
    harness_id: str, body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """Replaces the mutable configuration: a field left out takes its default (the name,
    a label, keeps its value). `id`, `base` and `createdAt` never change."""
    return harness_to_wire(await engine.harnesses.replace(principal.id, harness_id, body))


@router.delete("/v1/harnesses/{harness_id}")
async def delete_harness(
    harness_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """Soft delete: the sessions and responses that used it stay readable; continuing such
    a session answers harness_not_found."""
    deleted = await engine.harnesses.delete(principal.id, harness_id)
    return {"id": deleted, "object": "harness.deleted", "deleted": True}


@router.get("/v1/harnesses/{harness_id}/skills/{skill_name}/files")
async def get_skill_files(
    harness_id: str, skill_name: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """The whole folder of one of the harness's skills (its own or an inherited built-in)."""
    return await engine.harnesses.skill_folder(principal.id, harness_id, skill_name)


@router.get("/v1/harnesses/{harness_id}/plugins/{plugin_name}/files")
async def get_plugin_files(
    harness_id: str, plugin_name: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """The whole package of one of the harness's plugins, byte for byte."""
    return await engine.harnesses.plugin_files(principal.id, harness_id, plugin_name)


@router.get("/v1/harnesses/{harness_id}/plugin")
async def export_harness_plugin(
    harness_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """The harness's own MCP servers and skills as an Agent Plugins package that installs
    elsewhere, without its credentials."""
    return await engine.harnesses.export_plugin(principal.id, harness_id)


@router.get("/v1/models")
async def list_models(principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    # Keyed by provider: each provider that an enabled base can use (directly or translated).
    return {"object": "list", "backends": await engine.harnesses.models()}


@router.get("/v1/harnesses/{harness_id}/models")
async def list_harness_models(
    harness_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return await engine.harnesses.models_of(principal.id, harness_id)
