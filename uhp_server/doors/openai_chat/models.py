"""The principal's harnesses as OpenAI models: one id per harness, `<slug>--<harness id>`.

The slug makes a model picker readable; the harness id makes the name stable, so renaming a
harness does not break a client that remembered the old name (only the id part is matched).
A bare harness id, or a slug that names exactly one harness, is accepted too.
"""

from __future__ import annotations

import re
from typing import Any

from uhp_server.engine import HarnessSummary
from uhp_server.errors import ApiError

OWNER = "uhp-server"
_HARNESS_ID = re.compile(r"chrn_[0-9a-f]{32}")


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "harness"


def model_id(row: HarnessSummary) -> str:
    return f"{slug(row.name)}--{row.id}"


def model_object(row: HarnessSummary) -> dict[str, Any]:
    return {
        "id": model_id(row),
        "object": "model",
        "created": row.created_at_ms // 1000,
        "owned_by": OWNER,
    }


def resolve_model(harnesses: list[HarnessSummary], name: str) -> HarnessSummary:
    """The harness (of the principal's `harnesses`) a model name refers to; 404
    model_not_found otherwise."""
    found = _HARNESS_ID.search(name)
    if found and found.end() == len(name):
        by_id = [r for r in harnesses if r.id == found.group()]
        if by_id:
            return by_id[0]
    else:
        matches = [r for r in harnesses if slug(r.name) == name]
        if len(matches) == 1:
            return matches[0]
    raise ApiError(
        404,
        "model_not_found",
        f"The model '{name[:200]}' does not exist: GET /openai/v1/models lists your harnesses.",
        param="model",
    )
