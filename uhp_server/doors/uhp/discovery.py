"""Lifecycle §2: capability discovery, served without credentials."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from uhp_server import __version__
from uhp_server.doors.uhp.chapters import PLUGIN_SCHEMAS, PLUGINS, capabilities
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


def discovery_document() -> dict[str, Any]:
    """The same for every caller and every version asked for: nothing principal-specific."""
    served = capabilities()
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
    return document


@router.get("/v1/uhp")
def discovery() -> dict[str, Any]:
    return discovery_document()
