"""Harnesses chapter: discovering configured harnesses and the models they can run."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from storage import harnesses as harness_store
from storage.models import HarnessRow, Principal
from uhp_server.auth import CurrentPrincipal
from uhp_server.context import AppContext, Ctx
from uhp_server.errors import ApiError
from uhp_server.harnesses import ensure_defaults, to_wire

router = APIRouter()


def _harness_or_404(ctx: AppContext, principal: Principal, harness_id: str) -> HarnessRow:
    row = harness_store.get_harness(ctx.db, principal.id, harness_id)
    if row is None:
        raise ApiError(404, "harness_not_found", "No harness with that id.", param="harness_id")
    return row


async def _wire(ctx: AppContext, row: HarnessRow) -> dict[str, Any]:
    base = ctx.bases.get(row.base)
    default = None
    if base is not None and not row.config.get("defaultModel"):
        default = await ctx.upstreams.default_model(base.backend)
    return to_wire(row, base, default)


@router.get("/v1/harnesses")
async def list_harnesses(principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    ensure_defaults(ctx.db, principal.id, ctx.bases)
    rows = harness_store.list_harnesses(ctx.db, principal.id)
    return {"object": "list", "harnesses": [await _wire(ctx, row) for row in rows]}


@router.get("/v1/harnesses/{harness_id}")
async def get_harness(
    harness_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
) -> dict[str, Any]:
    return await _wire(ctx, _harness_or_404(ctx, principal, harness_id))


@router.get("/v1/models")
async def list_models(principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    backends: dict[str, Any] = {}
    for backend in sorted({base.backend for base in ctx.bases.values()}):
        entry = await ctx.catalog.backend_entry(backend)
        if entry is not None:
            backends[backend] = entry
    return {"object": "list", "backends": backends}


@router.get("/v1/harnesses/{harness_id}/models")
async def list_harness_models(
    harness_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
) -> dict[str, Any]:
    row = _harness_or_404(ctx, principal, harness_id)
    base = ctx.bases.get(row.base)
    if base is None:
        return {"harness_id": row.id, "models": []}
    return await ctx.catalog.harness_models(row.id, base, row.config.get("defaultModel"))
