"""What a turn gets from its harness's configuration: whole skill folders and MCP targets."""

from __future__ import annotations

from typing import Any

from harness_bases.base import SkillBundle, SkillFile
from storage import skills as skill_store
from storage.unit import Tx
from uhp_server.gateway.mcp_targets import McpTarget
from uhp_server.harnesses.builtin_skills import builtin_skills
from uhp_server.harnesses.mcp import turn_targets


def turn_skills(tx: Tx, principal_id: str, stored: list[dict[str, Any]]) -> tuple[SkillBundle, ...]:
    """The enabled skills, inherited built-ins included, each as its whole folder."""
    bundles = _inherited(stored)
    for entry in stored:
        if entry.get("builtin") or not entry.get("enabled", True):
            continue
        files = skill_store.read_bundle(tx, principal_id, entry["blob"]) or []
        bundles[entry["name"]] = SkillBundle(
            entry["name"], tuple(SkillFile(f.path, f.data) for f in files)
        )
    return tuple(bundles[name] for name in sorted(bundles))


def builtin_turn_skills() -> tuple[SkillBundle, ...]:
    """`turn_skills` of a harness that names no skill: the built-ins, with nothing to read."""
    bundles = _inherited([])
    return tuple(bundles[name] for name in sorted(bundles))


def _inherited(stored: list[dict[str, Any]]) -> dict[str, SkillBundle]:
    """The built-in skills `stored` does not name, by name."""
    bundles: dict[str, SkillBundle] = {}
    mentioned = {entry["name"].casefold() for entry in stored}  # names ignore case
    for name, skill in builtin_skills().items():
        if name.casefold() not in mentioned:
            bundles[name] = SkillBundle(name, tuple(SkillFile(f.path, f.data) for f in skill.files))
    return bundles


def turn_mcp_targets(
    tx: Tx, principal_id: str, stored: list[dict[str, Any]], allow_private: bool
) -> tuple[McpTarget, ...]:
    return turn_targets(tx, principal_id, stored, allow_private)
