"""What a turn gets from its harness's configuration (Plugins §4, its effective
configuration): whole skill folders, MCP targets for the gateway and the enabled plugins,
whose skills and remote servers join the harness's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness_bases.base import PluginPackage, SkillBundle, SkillFile
from storage import skills as skill_store
from storage.unit import Tx
from uhp_server.gateway.mcp_targets import McpTarget
from uhp_server.harnesses.builtin_skills import builtin_skills
from uhp_server.harnesses.config import HarnessConfig
from uhp_server.harnesses.mcp import turn_targets
from uhp_server.harnesses.plugins.runtime import turn_plugins


@dataclass(frozen=True)
class TurnParts:
    skills: tuple[SkillBundle, ...]  # enabled ones, built-ins and plugins' included
    mcp_servers: tuple[McpTarget, ...] = ()  # enabled remote ones, plugins' included
    plugins: tuple[PluginPackage, ...] = ()  # the enabled plugins, each whole


def turn_parts(tx: Tx, principal_id: str, config: HarnessConfig, allow_private: bool) -> TurnParts:
    plugins = turn_plugins(tx, principal_id, config.plugins, allow_private)
    return TurnParts(
        skills=turn_skills(tx, principal_id, config.skills, plugins.skills),
        mcp_servers=(
            *turn_mcp_targets(tx, principal_id, config.mcp_servers, allow_private),
            *plugins.mcp_targets,
        ),
        plugins=plugins.packages,
    )


def builtin_turn_parts() -> TurnParts:
    """`turn_parts` of a harness that names nothing of its own: the built-in skills, with
    nothing to read."""
    bundles = _inherited([])
    return TurnParts(skills=tuple(bundles[name] for name in sorted(bundles)))


def turn_skills(
    tx: Tx,
    principal_id: str,
    stored: list[dict[str, Any]],
    plugin_skills: tuple[SkillBundle, ...] = (),
) -> tuple[SkillBundle, ...]:
    """The enabled skills, inherited built-ins and the plugins' included, each as its whole
    folder."""
    bundles = _inherited([*stored, *({"name": s.name} for s in plugin_skills)])
    for entry in stored:
        if entry.get("builtin") or not entry.get("enabled", True):
            continue
        files = skill_store.read_bundle(tx, principal_id, entry["blob"]) or []
        bundles[entry["name"]] = SkillBundle(
            entry["name"], tuple(SkillFile(f.path, f.data) for f in files)
        )
    bundles.update((skill.name, skill) for skill in plugin_skills)
    return tuple(bundles[name] for name in sorted(bundles))


def _inherited(named: list[dict[str, Any]]) -> dict[str, SkillBundle]:
    """The built-in skills no entry of `named` names, by name."""
    bundles: dict[str, SkillBundle] = {}
    mentioned = {entry["name"].casefold() for entry in named}  # names ignore case
    for name, skill in builtin_skills().items():
        if name.casefold() not in mentioned:
            bundles[name] = SkillBundle(name, tuple(SkillFile(f.path, f.data) for f in skill.files))
    return bundles


def turn_mcp_targets(
    tx: Tx, principal_id: str, stored: list[dict[str, Any]], allow_private: bool
) -> tuple[McpTarget, ...]:
    return turn_targets(tx, principal_id, stored, allow_private)
