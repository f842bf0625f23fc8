"""The Agent Plugins versions this server installs: their schema identifiers and the
schemas themselves (the files beside this module; nothing is retrieved while a plugin is
read, Agent Plugins §5.2)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_DIR = Path(__file__).parent / "schemas"
# Each version's `plugin.json` and `mcp.json` identifiers (§10.1: never reassigned).
MANIFEST_SCHEMAS = {"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json": "1.0.0"}
MCP_SCHEMAS = {"https://agent-plugins.org/schemas/1.0.0/mcp.schema.json": "1.0.0"}
SUPPORTED = list(MANIFEST_SCHEMAS)  # what discovery lists as `plugin_schemas`


@cache
def schema(version: str, kind: str) -> dict[str, Any]:
    """The `kind` ("plugin" or "mcp") schema of Agent Plugins `version`."""
    document: dict[str, Any] = json.loads(
        (SCHEMA_DIR / version / f"{kind}.schema.json").read_text()
    )
    return document


@cache
def validator(version: str, kind: str, definition: str | None = None) -> jsonschema.Validator:
    """A validator for the whole document, or for one of its `$defs` (an MCP server variant)."""
    document = schema(version, kind)
    if definition is not None:
        document = {"$defs": document["$defs"], "$ref": f"#/$defs/{definition}"}
    return jsonschema.Draft202012Validator(document)
