"""Which model an invocation's turn runs: `context.config.models` `agent`, else its first
entry, else the harness's default model (as the platform's gateway is to know it)."""

from __future__ import annotations

from typing import Any

from storage import harnesses as harness_store
from storage.db import Database
from storage.models import HarnessRow
from uhp_server.context import AppContext
from uhp_server.frontdoors.agentos.contract import BadInvocation, chosen_model
from uhp_server.harnesses import default_harness


async def model_for(
    ctx: AppContext, principal_id: str, harness_id: str | None, models: dict[str, Any]
) -> str:
    chosen = chosen_model(models)
    if chosen:
        return chosen
    harness = await ctx.db.write(_harness, ctx, principal_id, harness_id)
    base = ctx.bases.get(harness.base)
    default = harness.config.get("defaultModel")
    if base is not None and not default:
        default = await ctx.catalog.default_for(base, None)
    if not default:
        raise BadInvocation(
            "no_model", "The version's config names no model and the harness has no default."
        )
    return default


def _harness(ctx: AppContext, principal_id: str, harness_id: str | None) -> HarnessRow:
    """On the writer thread: the principal's default harnesses are created on first use."""
    db: Database = ctx.db
    row = (
        harness_store.get_harness(db, principal_id, harness_id)
        if harness_id is not None
        else default_harness(db, principal_id, ctx.bases)
    )
    if row is None:
        raise BadInvocation("harness_not_found", "No such harness for this agent's principal.")
    return row
