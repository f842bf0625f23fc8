"""Harnesses chapter: discovering configured harnesses and the models they can run, and
(class Full) creating, replacing and deleting them (Harnesses §5)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body

from storage import harnesses as harness_store
from storage.db import Order
from storage.tables import HarnessRow, Principal
from storage.unit import Tx
from uhp_server.context import AppContext, Ctx
from uhp_server.errors import VENDOR, ApiError
from uhp_server.harnesses.body import ConfigRules, check_immutables, parse_harness_body
from uhp_server.harnesses.defaults import ensure_defaults, to_wire
from uhp_server.harnesses.problems import invalid
from uhp_server.harnesses.skills import render_skills, skill_folder
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute
from uhp_server.ids import new_id

router = APIRouter(route_class=StrictJsonRoute)


def _harness_or_404(tx: Tx, ctx: AppContext, principal: Principal, harness_id: str) -> HarnessRow:
    row = harness_store.get_harness(tx, principal.id, harness_id)
    if row is None:
        raise ApiError(404, "harness_not_found", "No harness with that id.", param="harness_id")
    return row


async def _wire(ctx: AppContext, row: HarnessRow) -> dict[str, Any]:
    base = ctx.bases.get(row.base)
    default = None
    if base is not None and not row.config.get("defaultModel"):
        default = await ctx.catalog.default_for(base, None)
    skills = await ctx.db.read(render_skills, row.principal_id, row.config.get("skills") or [])
    return to_wire(row, base, default, skills)


def _rules(ctx: AppContext) -> ConfigRules:
    settings = ctx.settings
    return ConfigRules(settings.max_timeout_seconds, settings.mcp_allow_private_hosts)


JsonObject = Annotated[dict[str, Any], Body()]


@router.get("/v1/harnesses")
async def list_harnesses(principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    def listed(tx: Tx) -> list[HarnessRow]:
        ensure_defaults(tx, principal.id, ctx.bases)  # a principal's first look makes them
        return harness_store.list_harnesses(tx, principal.id)

    rows = await ctx.db.write(listed)
    return {"object": "list", "harnesses": [await _wire(ctx, row) for row in rows]}


@router.post("/v1/harnesses")
async def create_harness(body: JsonObject, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    base_name = body.get("base")
    if not isinstance(base_name, str) or not base_name:
        invalid("base", "`base` is required: one of the bases this server supports.")
    base = ctx.bases.get(base_name)
    if base is None:
        raise ApiError(
            422,
            "unsupported_base",
            "This server does not support that base.",
            param="base",
            detail={"supported": sorted(ctx.bases)},
        )

    def created(tx: Tx) -> HarnessRow:
        name, config = parse_harness_body(
            tx, principal.id, body, base, _rules(ctx), default_name=base.label
        )
        row = HarnessRow(
            id=new_id("harness"),
            principal_id=principal.id,
            name=name,
            base=base.name,
            config=config,
            created_at_ms=int(time.time() * 1000),
        )
        harness_store.insert_harness(tx, row)
        return row

    return await _wire(ctx, await ctx.db.write(created, order=Order.ANY))


@router.get("/v1/harnesses/{harness_id}")
async def get_harness(
    harness_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
) -> dict[str, Any]:
    return await _wire(ctx, await ctx.db.read(_harness_or_404, ctx, principal, harness_id))


@router.put("/v1/harnesses/{harness_id}")
async def replace_harness(
    harness_id: str, body: JsonObject, principal: CurrentPrincipal, ctx: Ctx
) -> dict[str, Any]:
    """Replaces the mutable configuration: a field left out takes its default (the name,
    a label, keeps its value). `id`, `base` and `createdAt` never change."""

    def replaced(tx: Tx) -> HarnessRow:
        row = _harness_or_404(tx, ctx, principal, harness_id)
        check_immutables(body, row)
        name, config = parse_harness_body(
            tx, principal.id, body, ctx.bases.get(row.base), _rules(ctx), default_name=row.name
        )
        updated = harness_store.update_harness(tx, row.id, name, config)
        if updated is None:
            raise ApiError(404, "harness_not_found", "No harness with that id.", param="harness_id")
        return updated

    return await _wire(ctx, await ctx.db.write(replaced, order=Order.ANY))


@router.delete("/v1/harnesses/{harness_id}")
async def delete_harness(harness_id: str, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    """Soft delete: the sessions and responses that used it stay readable; continuing such
    a session answers harness_not_found."""

    def deleted(tx: Tx) -> HarnessRow:
        row = _harness_or_404(tx, ctx, principal, harness_id)
        harness_store.delete_harness(tx, row.id)
        return row

    row = await ctx.db.write(deleted, order=Order.ANY)
    return {"id": row.id, "object": "harness.deleted", "deleted": True}


@router.get("/v1/harnesses/{harness_id}/skills/{skill}/files")
async def get_skill_files(
    harness_id: str, skill: str, principal: CurrentPrincipal, ctx: Ctx
) -> dict[str, Any]:
    """The whole folder of one of the harness's skills (its own or an inherited built-in)."""
    row = await ctx.db.read(_harness_or_404, ctx, principal, harness_id)
    skills = row.config.get("skills") or []
    folder = await ctx.db.read(skill_folder, principal.id, skills, skill)
    if folder is None:
        raise ApiError(
            404,
            VENDOR + "skill_not_found",
            "This harness has no skill of that name.",
            param="skill",
        )
    return folder


@router.get("/v1/models")
async def list_models(principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    # Keyed by provider: each provider that an enabled base can use (directly or translated).
    backends: dict[str, Any] = {}
    wires = {base.wire for base in ctx.bases.values()}
    for name, provider in ctx.upstreams.providers.items():
        if not any(provider.serves(wire) for wire in wires):
            continue
        entry = await ctx.catalog.provider_entry(name)
        if entry is not None:
            backends[name] = entry
    return {"object": "list", "backends": backends}


@router.get("/v1/harnesses/{harness_id}/models")
async def list_harness_models(
    harness_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
) -> dict[str, Any]:
    row = await ctx.db.read(_harness_or_404, ctx, principal, harness_id)
    base = ctx.bases.get(row.base)
    if base is None:
        return {"harness_id": row.id, "models": []}
    return await ctx.catalog.harness_models(row.id, base, row.config.get("defaultModel"))
