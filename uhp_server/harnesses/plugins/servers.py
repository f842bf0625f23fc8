"""A package's MCP servers (Agent Plugins §7.2, Plugins §2.2): `mcp.json` read as an Agent
Plugins client reads it, each valid entry one plugin MCP server object.

`streamable-http` becomes transport `http`, `sse` stays `sse` (both reached through the
gateway's MCP proxy, like the harness's own servers), `stdio` is a process started inside
the sandbox (harness_bases/plugin_folders.py). `${PLUGIN_ROOT}` and `${PLUGIN_DATA}` are
reported as written. An invalid entry is skipped with its reason and the rest still load; an
invalid `mcp.json` (not JSON, another Agent Plugins version than plugin.json's, a top-level
violation) skips every server in it. Names are made CLI-safe as the harness's own are.
"""

from __future__ import annotations

import ipaddress
import json
import posixpath
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from storage.skills import StoredFile
from uhp_server.gateway.header_values import sendable
from uhp_server.gateway.url_policy import MCP_SETTING, UrlRefused, check_config_url, refusal
from uhp_server.harnesses.mcp import HEADER_NAME, MAX_SERVERS, RESERVED_HEADERS, sanitise_name
from uhp_server.harnesses.plugins.schemas import MCP_SCHEMAS, validator
from uhp_server.harnesses.plugins.skipped import Skipped, pointer

MCP_FILE = "mcp.json"
_TRANSPORTS = {"stdio": "stdio", "streamable-http": "http", "sse": "sse"}
_VARIANTS = {"stdio": "stdioServer", "streamable-http": "streamableHttpServer", "sse": "sseServer"}
_ROOT, _DATA = "${PLUGIN_ROOT}", "${PLUGIN_DATA}"


@dataclass(frozen=True)
class PluginServer:
    """One MCP server a plugin declares, as derived (PluginMcpServer on the wire)."""

    name: str  # CLI-safe, unique within the plugin
    transport: str  # "http" | "sse" | "stdio"
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def wire(self) -> dict[str, Any]:
        if self.transport == "stdio":
            place: dict[str, Any] = {
                "command": self.command,
                "args": list(self.args),
                "env": dict(self.env),
            }
            if self.cwd is not None:
                place["cwd"] = self.cwd
        else:
            place = {"url": self.url, "headers": dict(self.headers)}
        return {"name": self.name, "transport": self.transport, **place, "enabled": True}


def find_servers(
    files: list[StoredFile], version: str, allow_private: bool
) -> tuple[list[PluginServer], list[Skipped]]:
    """The servers of the package's mcp.json (none when it has none) and what was skipped.
    `version`: the Agent Plugins version plugin.json targets."""
    by_path = {f.path: f for f in files}
    if MCP_FILE not in by_path:
        if any(path.startswith(f"{MCP_FILE}/") for path in by_path):
            return [], [Skipped(MCP_FILE, "`mcp.json` is a folder, not a file; no MCP server.")]
        return [], []
    try:
        config = json.loads(by_path[MCP_FILE].data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # nested past any use
        return [], [Skipped(MCP_FILE, f"mcp.json is not valid JSON ({exc}); no MCP server.")]
    entries = config.get("mcpServers") if isinstance(config, dict) else None
    problem = _file_problem(config, version)
    if problem is not None:
        if not isinstance(entries, dict) or not entries:
            return [], [Skipped(MCP_FILE, problem)]
        return [], [Skipped(pointer(MCP_FILE, "mcpServers", name), problem) for name in entries]
    assert isinstance(entries, dict)  # _file_problem checked it
    servers: list[PluginServer] = []
    skipped: list[Skipped] = []
    taken: set[str] = set()
    for name, entry in entries.items():
        where = pointer(MCP_FILE, "mcpServers", name)
        found = _server(name, entry, version, by_path, allow_private)
        if isinstance(found, str):
            skipped.append(Skipped(where, found))
        elif found.name.casefold() in taken:
            skipped.append(Skipped(where, f"Its CLI-safe name '{found.name}' is taken already."))
        elif len(servers) == MAX_SERVERS:
            skipped.append(Skipped(where, f"A plugin may declare at most {MAX_SERVERS} servers."))
        else:
            taken.add(found.name.casefold())
            servers.append(found)
            skipped += _dropped_headers(name, entry)
    return servers, skipped


def _file_problem(config: Any, version: str) -> str | None:
    """Why none of mcp.json's servers can load, or None."""
    if not isinstance(config, dict):
        return "mcp.json must hold a JSON object; no MCP server loaded."
    declared = config.get("$schema")
    if not isinstance(declared, str) or declared not in MCP_SCHEMAS:
        return "mcp.json names no Agent Plugins MCP schema this server supports in `$schema`."
    if MCP_SCHEMAS[declared] != version:
        return (
            f"mcp.json targets Agent Plugins {MCP_SCHEMAS[declared]} and plugin.json "
            f"{version}; its servers are not loaded."
        )
    top = dict(config)
    if isinstance(top.get("mcpServers"), dict):  # each server is checked on its own below
        top["mcpServers"] = {}
    errors = list(validator(version, "mcp").iter_errors(top))
    if errors:
        return f"mcp.json is not valid ({errors[0].message}); no MCP server loaded."
    return None


def _server(
    name: str, entry: Any, version: str, files: dict[str, StoredFile], allow_private: bool
) -> PluginServer | str:
    """The server, or why the entry is invalid."""
    if not isinstance(entry, dict):
        return "A server entry must be an object."
    kind = entry.get("type")
    if not isinstance(kind, str) or kind not in _TRANSPORTS:
        return f"`type` {kind!r} is not one of stdio, streamable-http or sse."
    errors = list(validator(version, "mcp", _VARIANTS[kind]).iter_errors(entry))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path)
        return f"{where + ': ' if where else ''}{errors[0].message}"
    safe = sanitise_name(name)
    if kind == "stdio":
        problem = _stdio_problem(entry, files)
        if problem is not None:
            return problem
        return PluginServer(
            safe,
            "stdio",
            command=entry["command"],
            args=tuple(entry.get("args") or ()),
            env=dict(entry.get("env") or {}),
            cwd=entry.get("cwd"),
        )
    problem = _remote_problem(entry, allow_private)
    if problem is not None:
        return problem
    headers = {
        key: value
        for key, value in (entry.get("headers") or {}).items()
        if key.lower() not in RESERVED_HEADERS
    }
    return PluginServer(safe, _TRANSPORTS[kind], url=entry["url"], headers=headers)


# -- stdio ----------------------------------------------------------------------------------


def _stdio_problem(entry: dict[str, Any], files: dict[str, StoredFile]) -> str | None:
    command: str = entry["command"]
    strings = [command, *entry.get("args", ()), *(entry.get("env") or {}).values()]
    if any("\x00" in text for text in [*strings, entry.get("cwd") or ""]):
        return "A process cannot be given a NUL character."
    if any(ch.isspace() for ch in command):
        return "`command` must be one executable token, never a shell command."
    if command.startswith("./"):
        inside = _inside(command[2:])
        if inside is None:
            return "`command` leaves the plugin root."
        if inside not in files:
            return f"`command` names {command}, which is not a file in the package."
    elif "/" in command or command in (".", ".."):
        return "`command` must be a bare name, or a path in the package beginning with ./."
    for key in entry.get("env") or {}:
        if not key or "=" in key:
            return f"The environment variable name {key!r} is not valid."
    cwd = entry.get("cwd")
    if cwd is not None and not _cwd_inside(cwd):
        return "`cwd` leaves the plugin root or its data folder."
    return None


def _inside(relative: str) -> str | None:
    """`relative` normalised, or None when it leaves the folder it is relative to."""
    normal = posixpath.normpath(relative) if relative else "."
    if normal == ".." or normal.startswith("../") or normal.startswith("/"):
        return None
    return normal


def _cwd_inside(cwd: str) -> bool:
    """Whether `cwd` (`./…`, `${PLUGIN_ROOT}…` or `${PLUGIN_DATA}…`, which the schema
    checked) stays in the root, or in the data folder, once expanded and resolved."""
    if cwd.startswith("./"):
        return _inside(cwd[2:]) is not None
    for placeholder in (_ROOT, _DATA):
        if cwd.startswith(placeholder):
            rest = cwd[len(placeholder) :].replace(_ROOT, "/r").replace(_DATA, "/d")
            return _inside(rest.lstrip("/")) is not None
    return False


# -- streamable-http and sse -----------------------------------------------------------------


def _remote_problem(entry: dict[str, Any], allow_private: bool) -> str | None:
    url: str = entry["url"]
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return "`url` is not a valid URL."
    if parts.scheme not in ("http", "https") or not host:
        return "`url` must be an absolute http or https URL."
    if parts.username is not None or parts.password is not None or parts.fragment:
        return "`url` must carry no user information and no fragment."
    if parts.scheme == "http" and not _loopback(host):
        return "`url` must use https: plain http is for localhost and loopback addresses only."
    try:
        check_config_url(url, allow_private)
    except UrlRefused as exc:
        return f"This server's address policy refuses `url`: {refusal(exc, MCP_SETTING)}"
    seen: set[str] = set()
    for key, value in (entry.get("headers") or {}).items():
        if not HEADER_NAME.fullmatch(key) or not sendable(value):
            return f"The header {key!r} is not a valid HTTP header."
        if key.lower() in seen:
            return f"The header {key!r} is named twice (header names ignore case)."
        seen.add(key.lower())
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _dropped_headers(name: str, entry: dict[str, Any]) -> list[Skipped]:
    """Headers the gateway sets itself: not sent, and said so."""
    reason = "The MCP proxy sets this header itself; it is not sent."
    return [
        Skipped(pointer(MCP_FILE, "mcpServers", name, "headers", key), reason)
        for key in entry.get("headers") or {}
        if key.lower() in RESERVED_HEADERS
    ]
