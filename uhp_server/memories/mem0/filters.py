"""A recall's `filters` (§6.2) as mem0's own filter syntax, applied by Qdrant.

mem0 filters a payload field with `{"field": {"op": value}}` (eq, ne, gt, gte, lt, lte, in),
combined under `AND`. A record's `type` and its `attributes.*` are payload fields of each
version (payloads.py), so those are filtered natively. `time.*` is not offered: a version's
valid times are the writer's strings and its written time is the server's clock, neither
in a form mem0 compares as the chapter means; a question filtering on them is answered
`filters:not_supported` rather than filtered in part.
"""

from __future__ import annotations

from typing import Any

from uhp_server.memories.mem0 import payloads as p
from uhp_server.memories.provider import FieldFilter

OPS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in"})
ATTRIBUTES = "attributes."


def conditions(filters: tuple[Any, ...]) -> list[dict[str, Any]] | None:
    """mem0 conditions that must all hold, one per filter; None when one of them cannot be
    said in mem0's syntax (then none is applied, and the answer says so)."""
    said = []
    for condition in filters:
        field = _field(condition)
        if field is None:
            return None
        said.append({field: {condition.op: condition.value}})
    return said


def _field(condition: object) -> str | None:
    """The payload field a condition is over, or None when it is not one mem0 can filter."""
    if not isinstance(condition, FieldFilter) or condition.op not in OPS:
        return None
    if condition.op == "in" and not isinstance(condition.value, list):
        return None
    if condition.field == "type":
        return p.TYPE
    name = condition.field.removeprefix(ATTRIBUTES)
    if condition.field.startswith(ATTRIBUTES) and name and "[" not in name:
        return f"{p.BODY}.attributes.{name}"
    return None
