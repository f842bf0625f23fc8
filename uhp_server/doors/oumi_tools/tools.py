"""The caller's harnesses as MCP tool definitions."""

from __future__ import annotations

from typing import Any

from harness_bases.base import HarnessBase
from uhp_server.doors.harness_result import RESULT_SCHEMA, TOOL_INPUT_SCHEMA
from uhp_server.engine import HarnessSummary


def public_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema as a tool definition carries it (no `$schema` or `title` of its own)."""
    return {k: v for k, v in schema.items() if k not in ("$schema", "title")}


def harness_tools(
    harnesses: list[HarnessSummary], bases: dict[str, HarnessBase]
) -> list[dict[str, Any]]:
    tools = []
    for row in harnesses:
        base = bases.get(row.base)
        label = base.label if base else row.base
        tools.append(
            {
                "name": row.id,
                "title": row.name,
                "description": f"Run the harness '{row.name}' ({label}, a coding agent in a "
                "sandbox) on a prompt. Returns its answer, the files it produced and a "
                "session_id to continue the same session.",
                "inputSchema": public_schema(TOOL_INPUT_SCHEMA),
                "outputSchema": public_schema(RESULT_SCHEMA),
            }
        )
    return tools
