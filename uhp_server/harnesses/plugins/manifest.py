"""`plugin.json`, validated as Agent Plugins §5 says, against the schema its `$schema` names
(the server's own copy: nothing is retrieved while a plugin is read).

A `$schema` this server does not install is refused with `unsupported_plugin_schema`. The
schema is closed: an unknown top-level field, or a non-object `extensions`, is ignored and
recorded in `skipped`; every other violation is fatal (`plugin_invalid`). This server
implements no extension namespace, so each one the manifest carries is recorded as ignored,
its contents never looked at (§8.1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from uhp_server.harnesses.plugins.problems import plugin_invalid, unsupported_plugin_schema
from uhp_server.harnesses.plugins.schemas import MANIFEST_SCHEMAS, SUPPORTED, schema, validator
from uhp_server.harnesses.plugins.skipped import Skipped, pointer

MANIFEST_FILE = "plugin.json"
_NAME_RULE = (
    "`name` must be 1-64 lowercase letters, digits, '-' and '.', starting and ending with a "
    "letter or digit, with no '--' or '..'."
)


@dataclass(frozen=True)
class Manifest:
    fields: dict[str, Any]  # the manifest as loaded: ignored fields left out
    version: str  # the Agent Plugins version it targets, e.g. "1.0.0"
    skipped: tuple[Skipped, ...]

    @property
    def name(self) -> str:
        return str(self.fields["name"])


def read_manifest(data: bytes, param: str) -> Manifest:
    """The package's manifest, or the refusal of the whole plugin."""
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # nested past any use
        plugin_invalid(param, MANIFEST_FILE, f"plugin.json is not valid JSON ({exc}).")
    if not isinstance(manifest, dict):
        plugin_invalid(param, MANIFEST_FILE, "plugin.json must hold a JSON object.")
    declared = manifest.get("$schema")
    if not isinstance(declared, str) or not declared:
        at = pointer(MANIFEST_FILE, "$schema")
        plugin_invalid(param, at, "plugin.json must name its Agent Plugins schema in `$schema`.")
    version = MANIFEST_SCHEMAS.get(declared)
    if version is None:
        unsupported_plugin_schema(param, declared, SUPPORTED)
    known = set(schema(version, "plugin")["properties"])
    skipped = [
        Skipped(
            pointer(MANIFEST_FILE, field), "Not a field of the Agent Plugins manifest; ignored."
        )
        for field in manifest
        if field not in known
    ]
    loaded = {key: value for key, value in manifest.items() if key in known}
    extensions = loaded.get("extensions")
    if extensions is not None and not isinstance(extensions, dict):
        del loaded["extensions"]
        reason = "`extensions` must be an object; ignored."
        skipped.append(Skipped(pointer(MANIFEST_FILE, "extensions"), reason))
    errors = sorted(validator(version, "plugin").iter_errors(loaded), key=lambda e: e.json_path)
    if errors:
        error = errors[0]
        where = pointer(MANIFEST_FILE, *error.absolute_path)
        reason = _NAME_RULE if list(error.absolute_path) == ["name"] else error.message
        plugin_invalid(param, where, f"{where}: {reason}")
    for namespace in loaded.get("extensions") or {}:
        reason = f"This server implements no '{namespace}' extension; ignored."
        skipped.append(Skipped(pointer(MANIFEST_FILE, "extensions", namespace), reason))
    return Manifest(loaded, version, tuple(skipped))
