"""The principal's harnesses as OpenAI models: one id per harness, `<slug>--<harness id>`.

The slug makes a model picker readable; the harness id makes the name stable, so renaming a
harness does not break a client that remembered the old name (only the id part is matched).
A bare harness id, or a slug that names exactly one harness, is accepted too.
"""

from __future__ import annotations

import re
from typing import Any

from storage import harnesses as harness_store
from storage.db import Database
from storage.models import HarnessRow
from uhp_server.errors import ApiError

OWNER = "uhp-server"
_HARNESS_ID = re.compile(r"chrn_[0-9a-f]{32}")


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "harness"


def model_id(row: HarnessRow) -> str:
    return f"{slug(row.name)}--{row.id}"


def model_object(row: HarnessRow) -> dict[str, Any]:
    return {
        "id": model_id(row),
        "object": "model",
        "created": row.created_at_ms // 1000,
        "owned_by": OWNER,
    }


def resolve_model(db: Database, principal_id: str, name: str) -> HarnessRow:
    """The principal's harness a model name refers to; 404 model_not_found otherwise."""
    found = _HARNESS_ID.search(name)
    if found and found.end() == len(name):
        row = harness_store.get_harness(db, principal_id, found.group())
        if row is not None:
            return row
    else:
        matches = [
            r for r in harness_store.list_harnesses(db, principal_id) if slug(r.name) == name
        ]
        if len(matches) == 1:
            return matches[0]
    raise ApiError(
        404,
        "model_not_found",
        f"The model '{name[:200]}' does not exist: GET /openai/v1/models lists your harnesses.",
        param="model",
    )
