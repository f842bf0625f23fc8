"""A harness's own tools and skills as an Agent Plugins package (Plugins §5): the harness's
direct configuration is a plugin without a name, and this gives it one.

- `plugin.json`: the 1.0.0 `$schema` and a name made from the harness's name (its id when
  nothing of the name is left);
- `mcp.json`: the enabled direct MCP servers, `http` as `streamable-http`, without `auth`,
  `headers` and the URL's query parameters named like a credential (`?api_key=…`, as many
  hosted servers take their key): credentials entered for this harness never travel, and
  each omission is recorded in `skipped` so that whoever installs it knows what to enter
  again;
- `skills/<name>/…`: each enabled skill of the harness's own, whole (not the built-ins, which
  are this server's, nor installed plugins: a plugin contains no plugins).

The result is a plugin object whose files install unchanged into another harness.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from storage import skills as bundle_store
from storage.skills import StoredFile
from storage.unit import Tx
from uhp_server.harnesses.config import HarnessConfig
from uhp_server.harnesses.mcp import SENSITIVE_NAME
from uhp_server.harnesses.plugins.derive import derive
from uhp_server.harnesses.plugins.manifest import MANIFEST_FILE
from uhp_server.harnesses.plugins.schemas import MANIFEST_SCHEMAS, MCP_SCHEMAS
from uhp_server.harnesses.plugins.servers import MCP_FILE
from uhp_server.harnesses.plugins.skills import SKILLS_DIR
from uhp_server.harnesses.plugins.skipped import Skipped, bounded, pointer
from uhp_server.harnesses.skills import file_wire

VERSION = "1.0.0"  # the Agent Plugins version exports target
MAX_NAME = 64
_NOT_NAME = re.compile(r"[^a-z0-9.]+")
_DOTS = re.compile(r"\.{2,}")
CREDENTIALS_LEFT_OUT = (
    "Its `auth`, `headers` and URL query parameters named like a credential were left out: "
    "credentials entered for this harness do not travel; enter them again where the plugin "
    "is installed."
)


def package_name(text: str) -> str:
    """`text` as an Agent Plugins name (§5.5): lower case; every run of characters outside
    a-z, 0-9 and '.' one '-'; '..' one '.'; no '-' or '.' at either end; at most 64."""
    name = _DOTS.sub(".", _NOT_NAME.sub("-", text.lower())).strip("-.")
    return name[:MAX_NAME].strip("-.")


def export_plugin(
    tx: Tx,
    principal_id: str,
    harness_id: str,
    harness_name: str,
    config: HarnessConfig,
    allow_private: bool,
) -> dict[str, Any]:
    """The harness's own servers and skills as a plugin object, every file with contents."""
    name = package_name(harness_name) or package_name(harness_id)
    manifest = {"$schema": _identifier(MANIFEST_SCHEMAS), "name": name}
    files = [_json_file(MANIFEST_FILE, manifest)]
    servers, left_out = _servers(config.mcp_servers)
    if servers:
        files.append(
            _json_file(MCP_FILE, {"$schema": _identifier(MCP_SCHEMAS), "mcpServers": servers})
        )
    for skill in config.skills:
        if skill.get("builtin") or not skill["enabled"]:
            continue
        for file in bundle_store.read_bundle(tx, principal_id, skill["blob"]) or []:
            path = f"{SKILLS_DIR}/{skill['name']}/{file.path}"
            files.append(StoredFile(path, file.data, file.encoding))
    derived = derive(files, "plugin", allow_private)
    return {
        "name": derived.name,
        "enabled": True,
        "files": [file_wire(f, with_content=True) for f in files],
        **derived.wire(),
        "skipped": [s.wire() for s in bounded([*left_out, *derived.skipped])],
    }


def _servers(stored: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Skipped]]:
    servers: dict[str, Any] = {}
    left_out: list[Skipped] = []
    for server in stored:
        if not server.get("enabled", True):
            continue
        kind = "sse" if server.get("transport") == "sse" else "streamable-http"
        url, url_had_credentials = _url_without_credentials(server["url"])
        servers[server["name"]] = {"type": kind, "url": url}
        if server.get("auth") or server.get("headers") or url_had_credentials:
            where = pointer(MCP_FILE, "mcpServers", server["name"])
            left_out.append(Skipped(where, CREDENTIALS_LEFT_OUT))
    return servers, left_out


def _url_without_credentials(url: str) -> tuple[str, bool]:
    """`url` without its query parameters named like a credential, and whether it had any."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(name, value) for name, value in pairs if not SENSITIVE_NAME.fullmatch(name.lower())]
    if len(kept) == len(pairs):
        return url, False
    return urlunsplit(parts._replace(query=urlencode(kept))), True


def _identifier(schemas: dict[str, str]) -> str:
    return next(identifier for identifier, version in schemas.items() if version == VERSION)


def _json_file(path: str, value: dict[str, Any]) -> StoredFile:
    return StoredFile(path, json.dumps(value, indent=2).encode("utf-8") + b"\n", "text")
