"""Lifecycle §2: capability discovery, served without credentials."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from uhp_server import __version__
from uhp_server.doors.deps import EngineDep
from uhp_server.doors.uhp.chapters import PLUGIN_SCHEMAS, PLUGINS, capabilities, turned_off
from uhp_server.harnesses.default_base import default_base_name
from uhp_server.http.strict_json import StrictJsonRoute
from uhp_server.http.versioning import DEFAULT_VERSION, SUPPORTED_VERSIONS

router = APIRouter(route_class=StrictJsonRoute)

_EXTENDED = ("files_input", "files_output", "session_listing")
_FULL = (*_EXTENDED, "harness_management", "session_sharing")


def conformance_class(capabilities: dict[str, bool]) -> str:
    if all(capabilities.get(name) for name in _FULL):
        return "full"
    if all(capabilities.get(name) for name in _EXTENDED):
        return "extended"
    return "core"


def discovery_document(
    default_base: str | None, off: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The same for every caller and every version asked for: nothing principal-specific.
    `default_base`: the base a task without `metadata.harness_id` runs on, said in the
    free-form `implementation` (this server's own field; left out when no base is enabled).
    `off`: the chapters the operator turned off (chapters.turned_off)."""
    served = capabilities(off)
    document: dict[str, Any] = {
        "object": "uhp.discovery",
        "protocol": "uhp",
        "versions": list(SUPPORTED_VERSIONS),
        "default_version": DEFAULT_VERSION,
        "conformance_class": conformance_class(served),
        "capabilities": served,
    }
    if PLUGINS.served:  # present and non-empty exactly when plugins is (Plugins §7)
        document["plugin_schemas"] = list(PLUGIN_SCHEMAS)
    document["implementation"] = {"name": "UHP Server", "version": __version__}
    if default_base is not None:
        document["implementation"]["default_base"] = default_base
    return document


@router.get("/v1/uhp")
def discovery(engine: EngineDep) -> dict[str, Any]:
    return discovery_document(default_base_name(engine.bases), turned_off(engine.settings))
