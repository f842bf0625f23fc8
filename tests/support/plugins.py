"""Agent Plugins packages for tests, as the `files` of a UHP plugin object."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

MANIFEST_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"
STDIO_SERVER = (Path(__file__).parent / "stdio_mcp_server.py").read_text()
BINARY = bytes(range(256)) * 3  # every byte value: what a package's binaries carry


def skill_md(name: str, description: str = "A skill for tests.", body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def manifest(name: str = "demo-plugin", **fields: Any) -> dict[str, Any]:
    return {"$schema": MANIFEST_SCHEMA, "name": name, **fields}


def mcp_config(**servers: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": MCP_SCHEMA, "mcpServers": servers}


def text(path: str, content: str | dict[str, Any]) -> dict[str, Any]:
    body = content if isinstance(content, str) else json.dumps(content)
    return {"path": path, "content": body}


def binary(path: str, data: bytes) -> dict[str, Any]:
    return {"path": path, "content_b64": base64.b64encode(data).decode()}


def package(
    name: str = "demo-plugin",
    *,
    servers: dict[str, dict[str, Any]] | None = None,
    skills: tuple[str, ...] = ("demo-skill",),
    extra: tuple[dict[str, Any], ...] = (),
    **manifest_fields: Any,
) -> list[dict[str, Any]]:
    """plugin.json, an mcp.json when `servers` is given, a SKILL.md and a reference per
    skill, a binary, and `extra`."""
    files = [text("plugin.json", manifest(name, **manifest_fields))]
    if servers is not None:
        files.append(text("mcp.json", mcp_config(**servers)))
    for skill in skills:
        files.append(text(f"skills/{skill}/SKILL.md", skill_md(skill, body="See references.\n")))
        files.append(text(f"skills/{skill}/references/notes.md", f"notes of {skill}\n"))
    files.append(binary("assets/data.bin", BINARY))
    return [*files, *extra]


def stdio_server(**fields: Any) -> dict[str, Any]:
    """The stamp server (stdio_mcp_server.py) at `./bin/stamp` (add stamp_files())."""
    return {"type": "stdio", "command": "./bin/stamp", **fields}


def stamp_files() -> tuple[dict[str, Any], ...]:
    return (text("bin/stamp", STDIO_SERVER),)
