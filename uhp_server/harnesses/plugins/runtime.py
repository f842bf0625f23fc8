"""What a turn gets from a harness's enabled plugins (Plugins §4, §6): each package whole,
its skills beside the harness's own, its remote MCP servers through the gateway's MCP proxy
like the harness's own, its stdio servers to start inside the sandbox. A disabled plugin
gives nothing: nothing of it is placed, contacted or started."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from harness_bases.base import PluginPackage, SkillBundle, SkillFile, StdioServer
from storage import skills as bundle_store
from storage.unit import Tx
from uhp_server.gateway.mcp_targets import McpTarget
from uhp_server.harnesses.plugins.skills import SKILLS_DIR


@dataclass(frozen=True)
class TurnPlugins:
    skills: tuple[SkillBundle, ...] = ()
    mcp_targets: tuple[McpTarget, ...] = ()  # the remote servers
    packages: tuple[PluginPackage, ...] = ()


def turn_plugins(
    tx: Tx, principal_id: str, stored: list[dict[str, Any]], allow_private: bool
) -> TurnPlugins:
    skills: list[SkillBundle] = []
    targets: list[McpTarget] = []
    packages: list[PluginPackage] = []
    for entry in stored:
        if not entry["enabled"]:
            continue
        files = bundle_store.read_bundle(tx, principal_id, entry["blob"]) or []
        servers = entry["mcpServers"]
        commands = [s["command"] for s in servers if s["transport"] == "stdio"]
        # A server's `./` command is made runnable (the wire carries no file modes).
        runnable = {posixpath.normpath(c[2:]) for c in commands if c.startswith("./")}
        package = tuple(SkillFile(f.path, f.data, f.path in runnable) for f in files)
        for skill in entry["skills"]:
            folder = f"{SKILLS_DIR}/{skill['name']}/"
            inside = tuple(
                SkillFile(f.path.removeprefix(folder), f.data, f.executable)
                for f in package
                if f.path.startswith(folder)
            )
            skills.append(SkillBundle(skill["name"], inside, plugin=entry["name"]))
        targets += [_target(s, allow_private) for s in servers if s["transport"] != "stdio"]
        manifest = entry["manifest"]
        packages.append(
            PluginPackage(
                name=entry["name"],
                files=package,
                stdio_servers=tuple(_stdio(s) for s in servers if s["transport"] == "stdio"),
                version=manifest.get("version"),
                description=manifest.get("description"),
            )
        )
    return TurnPlugins(tuple(skills), tuple(targets), tuple(packages))


def _target(server: dict[str, Any], allow_private: bool) -> McpTarget:
    """A remote server, reached through the gateway's proxy; its headers are the package's
    (never credentials, Agent Plugins §7.2.1) and are sent as they are, unexpanded."""
    return McpTarget(
        name=server["name"],
        url=server["url"],
        transport=server["transport"],
        headers=dict(server["headers"]),
        allow_private=allow_private,
    )


def _stdio(server: dict[str, Any]) -> StdioServer:
    return StdioServer(
        name=server["name"],
        command=server["command"],
        args=tuple(server["args"]),
        env=tuple(server["env"].items()),
        cwd=server.get("cwd"),
    )
