"""Plugins back to the wire (Plugins §2, §3.1): each plugin object with its `blob` and what
was derived from its package; a package up to INLINE_BYTES also carries its `files`, with
contents, so a GET→PUT round trip is lossless either way. The whole package, whatever its
size, is at GET /v1/harnesses/{id}/plugins/{name}/files."""

from __future__ import annotations

from typing import Any

from storage import skills as bundle_store
from storage.unit import Tx
from uhp_server.harnesses.skills import INLINE_BYTES, file_wire

_DERIVED = ("manifest", "mcpServers", "skills", "skipped")


def render_plugins(tx: Tx, principal_id: str, stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_plugin_wire(tx, principal_id, entry) for entry in stored]


def _plugin_wire(tx: Tx, principal_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    wire = {"name": entry["name"], "enabled": entry["enabled"], "blob": entry["blob"]}
    manifest = bundle_store.get_manifest(tx, principal_id, entry["blob"]) or []
    if sum(m.size for m in manifest) <= INLINE_BYTES:
        files = bundle_store.read_bundle(tx, principal_id, entry["blob"]) or []
        wire["files"] = [file_wire(f, with_content=True) for f in files]
    return {**wire, **{key: entry[key] for key in _DERIVED}}


def plugin_files(
    tx: Tx, principal_id: str, stored: list[dict[str, Any]], name: str
) -> dict[str, Any] | None:
    """Every file of the plugin's package, with contents; None when there is no such plugin."""
    entry = next((e for e in stored if e["name"] == name), None)
    if entry is None:
        return None
    files = bundle_store.read_bundle(tx, principal_id, entry["blob"]) or []
    return {
        "object": "list",
        "name": name,
        "files": [file_wire(f, with_content=True) for f in files],
    }
