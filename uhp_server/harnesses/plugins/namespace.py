"""One namespace per harness (Plugins §4.2): the agent sees one MCP configuration and one
skills folder, so a name may have one owner, the harness or one plugin. Only what is
enabled counts (disabling either side clears a conflict); names ignore case, as the
harness's own do. A collision refuses the write with `plugin_conflict`."""

from __future__ import annotations

from typing import Any

from uhp_server.harnesses.builtin_skills import builtin_skills
from uhp_server.harnesses.plugins.problems import plugin_conflict

HARNESS = "harness"  # the owner of the harness's own servers and skills


def check_namespace(
    mcp_servers: list[dict[str, Any]],
    skills: list[dict[str, Any]],
    plugins: list[dict[str, Any]],
) -> None:
    """`mcp_servers`, `skills`, `plugins`: a harness row's stored entries."""
    servers = _Owners("mcp_server")
    names = _Owners("skill")
    for server in mcp_servers:
        if server.get("enabled", True):
            servers.claim(server["name"], HARNESS)
    for name in _harness_skills(skills):
        names.claim(name, HARNESS)
    for plugin in plugins:
        if not plugin["enabled"]:
            continue
        for server in plugin["mcpServers"]:
            servers.claim(server["name"], plugin["name"])
        for skill in plugin["skills"]:
            names.claim(skill["name"], plugin["name"])


def _harness_skills(stored: list[dict[str, Any]]) -> list[str]:
    """The enabled skills of the harness itself: its own, and the built-ins it inherits."""
    own = [entry["name"] for entry in stored if entry.get("enabled", True)]
    mentioned = {entry["name"].casefold() for entry in stored}
    inherited = [name for name in builtin_skills() if name.casefold() not in mentioned]
    return [*own, *inherited]


class _Owners:
    def __init__(self, component: str) -> None:
        self.component = component
        self.owners: dict[str, str] = {}

    def claim(self, name: str, owner: str) -> None:
        first = self.owners.setdefault(name.casefold(), owner)
        if first != owner:
            plugin_conflict(self.component, name, (first, owner))
