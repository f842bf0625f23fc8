"""The `plugins` of a POST/PUT body (Plugins §3): each package checked whole, its
contributions derived, its files stored out of line (once all of the body is valid).

A harness row keeps each plugin as `{"name", "enabled", "blob", "manifest", "mcpServers",
"skills", "skipped"}`: the handle of its package and what was derived from it, so a read
needs no package. A plugin sent back with only its `blob` keeps the package it had, derived
again. A write is refused whole: a plugin is installed entirely or not at all.
"""

from __future__ import annotations

from typing import Any

from harness_bases.base import HarnessBase
from storage.skills import PACKAGE_PREFIX
from uhp_server.harnesses.plugins.derive import Derived, derive
from uhp_server.harnesses.plugins.manifest import MANIFEST_FILE
from uhp_server.harnesses.plugins.package import package_files
from uhp_server.harnesses.plugins.problems import (
    plugin_conflict,
    plugin_invalid,
    unsupported_transport,
)
from uhp_server.harnesses.plugins.skipped import pointer
from uhp_server.harnesses.problems import invalid
from uhp_server.harnesses.writes import PendingWrites

MAX_PLUGINS = 16


def parse_plugins(
    writes: PendingWrites,
    raw: Any,
    param: str,
    base: HarnessBase | None,
    allow_private: bool,
) -> list[dict[str, Any]]:
    """Validate and store the plugins of a body; returns the harness row's entries."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        invalid(param, "`plugins` must be an array.")
    if len(raw) > MAX_PLUGINS:
        invalid(
            param, f"A harness may have at most {MAX_PLUGINS} plugins.", max_plugins=MAX_PLUGINS
        )
    entries: list[dict[str, Any]] = []
    for index, item in enumerate(raw):
        entry = _plugin(writes, item, f"{param}[{index}]", base, allow_private)
        if any(other["name"] == entry["name"] for other in entries):
            name = entry["name"]
            plugin_conflict("plugin", name, (name, name))
        entries.append(entry)
    return entries


def _plugin(
    writes: PendingWrites,
    item: Any,
    at: str,
    base: HarnessBase | None,
    allow_private: bool,
) -> dict[str, Any]:
    if not isinstance(item, dict):
        invalid(at, "A plugin must be an object with its package's `files`.")
    enabled = item.get("enabled", True)
    if enabled is None:
        enabled = True
    if not isinstance(enabled, bool):
        invalid(f"{at}.enabled", "`enabled` must be true or false.")
    files = package_files(writes, item, at)
    derived = derive(files, at, allow_private)
    named = item.get("name")
    if named is not None and named != derived.name:
        # The manifest names the plugin, so that one renamed on install is still the plugin
        # its author published.
        plugin_invalid(
            f"{at}.name",
            pointer(MANIFEST_FILE, "name"),
            f"`name` ({named!r}) must be the manifest's name ({derived.name!r}) or left out.",
        )
    if enabled and base is not None:
        _check_transports(derived, base, at)
    blob = writes.bundle(files, PACKAGE_PREFIX)
    return {"name": derived.name, "enabled": enabled, "blob": blob, **derived.wire()}


def _check_transports(derived: Derived, base: HarnessBase, at: str) -> None:
    """A server this base cannot run refuses the write, rather than being skipped in the
    dark at run time (Plugins §6)."""
    for server in derived.servers:
        runs = (
            base.stdio_mcp
            if server.transport == "stdio"
            else (server.transport in base.mcp_transports)
        )
        if not runs:
            unsupported_transport(f"{at}.files", server.transport, base.name, server.name)
