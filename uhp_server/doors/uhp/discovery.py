"""Lifecycle §2: capability discovery, served without credentials."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from uhp_server import __version__
from uhp_server.harnesses.plugins.schemas import SUPPORTED as PLUGIN_SCHEMAS
from uhp_server.http.strict_json import StrictJsonRoute
from uhp_server.http.versioning import DEFAULT_VERSION, SUPPORTED_VERSIONS

router = APIRouter(route_class=StrictJsonRoute)

# What this server implements. A capability is true only once it is built and tested;
# the class follows from the capabilities, never the other way round.
CAPABILITIES: dict[str, bool] = {
    "streaming": True,
    "sessions": True,
    "cancellation": True,
    "idempotency": True,
    "files_input": True,
    "files_output": True,
    "session_listing": True,
    "harness_management": True,
    "session_sharing": True,
    "plugins": True,  # optional at every class (Plugins §7)
}

_EXTENDED = ("files_input", "files_output", "session_listing")
_FULL = (*_EXTENDED, "harness_management", "session_sharing")


def conformance_class(capabilities: dict[str, bool]) -> str:
    if all(capabilities.get(name) for name in _FULL):
        return "full"
    if all(capabilities.get(name) for name in _EXTENDED):
        return "extended"
    return "core"


@router.get("/v1/uhp")
def discovery() -> dict[str, Any]:
    return {
        "object": "uhp.discovery",
        "protocol": "uhp",
        "versions": list(SUPPORTED_VERSIONS),
        "default_version": DEFAULT_VERSION,
        "conformance_class": conformance_class(CAPABILITIES),
        "capabilities": dict(CAPABILITIES),
        # The Agent Plugins manifest schemas installed: present whenever `plugins` is true.
        "plugin_schemas": list(PLUGIN_SCHEMAS),
        "implementation": {"name": "UHP Server", "version": __version__},
    }
