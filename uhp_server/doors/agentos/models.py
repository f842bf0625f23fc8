"""Which model an invocation's turn runs: `context.config.models` `agent`, else its first
entry, else the harness's default model (as the platform's gateway is to know it)."""

from __future__ import annotations

from typing import Any

from uhp_server.doors.agentos.contract import BadInvocation, chosen_model
from uhp_server.engine import Engine


async def model_for(
    engine: Engine, principal_id: str, harness_id: str | None, models: dict[str, Any]
) -> str:
    chosen = chosen_model(models)
    if chosen:
        return chosen
    harness = await engine.harnesses.summary(principal_id, harness_id)
    if harness is None:
        raise BadInvocation("harness_not_found", "No such harness for this agent's principal.")
    default = await engine.harnesses.default_model(harness)
    if not default:
        raise BadInvocation(
            "no_model", "The version's config names no model and the harness has no default."
        )
    return default
