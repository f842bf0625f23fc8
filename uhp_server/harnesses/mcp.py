"""MCP servers of a harness: validated, names made CLI-safe, credentials kept server-side.

`auth` and the values of credential-like headers are stored in storage.mcp_secrets; the
harness keeps (and a GET returns) only a `uhp-secret:<id>` reference, which a PUT may send
back unchanged as long as the server's URL keeps its origin: each secret is bound to the
origin it was stored for, so a reference can never carry a credential to another server.
The URL passes the configuration-time policy (gateway.url_policy); the gateway applies the
run-time one when it connects.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from harness_bases.base import HarnessBase
from storage import mcp_secrets
from storage.unit import Tx
from uhp_server.gateway.header_values import sendable
from uhp_server.gateway.mcp_targets import McpTarget
from uhp_server.gateway.url_policy import (
    MCP_SETTING,
    CredentialsInUrl,
    UrlRefused,
    check_config_url,
    refusal,
)
from uhp_server.harnesses.problems import invalid
from uhp_server.harnesses.writes import PendingWrites

log = logging.getLogger(__name__)

MAX_SERVERS = 20
MAX_HEADERS = 32
MAX_HEADER_VALUE = 8192
SECRET_REF = mcp_secrets.SECRET_REF
_TRANSPORTS = {
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
}
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
# Set by the gateway itself (or meaningless through it): a harness cannot override them.
RESERVED_HEADERS = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
    "accept-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
}
# A header name (or a URL query parameter's, plugins/export.py) that carries a credential.
SENSITIVE_NAME = re.compile(r"authorization|cookie|.*(key|token|secret|auth|passw|session).*")


def sanitise_name(raw: str) -> str:
    """A CLI-safe identifier: letters, digits, '_' and '-' (Codex namespaces tools by it)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", raw.strip()).strip("_")[:48]
    return name or "mcp"


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate.casefold() in taken:
        candidate, n = f"{name}_{n}", n + 1
    taken.add(candidate.casefold())
    return candidate


def parse_mcp_servers(
    writes: PendingWrites,
    raw: Any,
    param: str,
    base: HarnessBase | None,
    allow_private: bool,
) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        invalid(param, "`mcp_servers` must be an array.")
    if len(raw) > MAX_SERVERS:
        invalid(param, f"A harness may have at most {MAX_SERVERS} MCP servers.")
    taken: set[str] = set()
    servers = []
    for index, item in enumerate(raw):
        at = f"{param}[{index}]"
        if not isinstance(item, dict):
            invalid(at, "An MCP server must be an object with `name` and `url`.")
        server = _parse_server(writes, item, at, base, allow_private)
        server["name"] = _unique(server["name"], taken)
        servers.append(server)
    return servers


def _parse_server(
    writes: PendingWrites,
    item: dict[str, Any],
    at: str,
    base: HarnessBase | None,
    allow_private: bool,
) -> dict[str, Any]:
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        invalid(f"{at}.name", "An MCP server needs a `name`.")
    url = item.get("url")
    if url is not None and not isinstance(url, str):
        invalid(f"{at}.url", "`url` must be a string.")
    try:
        url = check_config_url(url or "", allow_private)  # (none: refused as empty)
    except CredentialsInUrl as exc:
        invalid(f"{at}.url", exc.where_instead("`auth` or `headers`"))
    except UrlRefused as exc:
        invalid(f"{at}.url", refusal(exc, MCP_SETTING))
    enabled = item.get("enabled", True)
    if enabled is None:
        enabled = True
    if not isinstance(enabled, bool):
        invalid(f"{at}.enabled", "`enabled` must be true or false.")
    transport = _transport(item.get("transport"), f"{at}.transport", base, enabled)
    origin = mcp_secrets.url_origin(url)
    headers = _headers(writes, item.get("headers"), f"{at}.headers", origin)
    auth = _auth(writes, item.get("auth"), f"{at}.auth", origin)
    if auth is not None and any(k.lower() == "authorization" for k in headers):
        invalid(f"{at}.auth", "Give the credential in `auth` or an Authorization header, not both.")
    server: dict[str, Any] = {
        "name": sanitise_name(name),
        "url": url,
        "transport": transport,
        "enabled": enabled,
        "headers": headers,
    }
    if auth is not None:
        server["auth"] = auth
    return server


def _transport(raw: Any, param: str, base: HarnessBase | None, enabled: bool) -> str:
    if raw is None:
        return "http"
    transport = _TRANSPORTS.get(str(raw).strip().lower()) if isinstance(raw, str) else None
    if transport is None:
        invalid(param, "`transport` must be 'http' (Streamable HTTP) or 'sse'.")
    # Advertising a server the base cannot speak to would only fail later, in the dark.
    if enabled and base is not None and transport not in base.mcp_transports:
        invalid(
            param,
            f"The {base.label} base cannot use MCP servers over '{transport}'.",
            supported=list(base.mcp_transports),
        )
    return transport


def _secret_or_ref(writes: PendingWrites, value: str, param: str, origin: str) -> str:
    """A stored reference for value (or value itself when it already is a valid one for
    this origin)."""
    if value.startswith(SECRET_REF):
        row = mcp_secrets.get_secret_row(writes.tx, writes.principal_id, value[len(SECRET_REF) :])
        if row is None:
            invalid(param, "Unknown secret reference: pass back the one a GET returned.")
        if row.origin != origin:
            # A reference is write-only for the value, not for where it goes: re-pointing
            # it would hand the credential to whichever server the caller names.
            invalid(
                param,
                "This secret was stored for a different server (scheme, host and port); "
                "send the credential itself to use it with this URL.",
            )
        return value
    return SECRET_REF + writes.secret(value, origin)


def _check_value(value: Any, param: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_HEADER_VALUE:
        invalid(
            param,
            f"A header value must be a non-empty string of at most {MAX_HEADER_VALUE} characters.",
        )
    if not sendable(value):
        invalid(param, "A header value must be printable ASCII (no line breaks or controls).")
    return value


def _headers(writes: PendingWrites, raw: Any, param: str, origin: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or len(raw) > MAX_HEADERS:
        invalid(param, f"`headers` must be an object of at most {MAX_HEADERS} string values.")
    headers: dict[str, str] = {}
    for key, value in raw.items():
        if not HEADER_NAME.fullmatch(key) or key.lower() in RESERVED_HEADERS:
            invalid(f"{param}.{key}", "This header name is not allowed.")
        if key.lower() in (name.lower() for name in headers):
            invalid(f"{param}.{key}", "This header is named twice (header names ignore case).")
        value = _check_value(value, f"{param}.{key}")
        if SENSITIVE_NAME.fullmatch(key.lower()) or value.startswith(SECRET_REF):
            value = _secret_or_ref(writes, value, f"{param}.{key}", origin)
        headers[key] = value
    return headers


def _auth(writes: PendingWrites, raw: Any, param: str, origin: str) -> str | None:
    if raw is None:
        return None
    value = _check_value(raw, param)
    if value.lower().startswith("bearer "):
        value = value[7:].strip()
    if not value:
        invalid(param, "`auth` must be a bearer token or a secret reference.")
    return _secret_or_ref(writes, value, param, origin)


def render_mcp_servers(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wire shape: as stored, which holds only references to credentials."""
    return [{**server, "headers": dict(server.get("headers") or {})} for server in stored]


def turn_targets(
    tx: Tx, principal_id: str, stored: list[dict[str, Any]], allow_private: bool
) -> tuple[McpTarget, ...]:
    """The enabled servers with their credentials resolved, for the gateway's grant."""
    targets = []
    for server in stored:
        if not server.get("enabled", True):
            continue  # never contacted, not even probed
        origin = mcp_secrets.url_origin(server["url"])
        headers: dict[str, str] = {}
        secrets: list[str] = []
        for key, value in (server.get("headers") or {}).items():
            resolved = _resolve(tx, principal_id, value, origin, server["name"])
            if resolved is not None:
                headers[key] = resolved
                secrets += [resolved] if value.startswith(SECRET_REF) else []
        if server.get("auth"):
            token = _resolve(tx, principal_id, server["auth"], origin, server["name"])
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
                secrets.append(token)
        targets.append(
            McpTarget(
                name=server["name"],
                url=server["url"],
                transport=server.get("transport", "http"),
                headers=headers,
                allow_private=allow_private,
                secrets=tuple(secrets),
            )
        )
    return tuple(targets)


def _resolve(tx: Tx, principal_id: str, value: str, origin: str, name: str) -> str | None:
    """A header value with its reference resolved; None when the secret may not go to this
    origin (a configuration stored before secrets were bound to one, already re-pointed):
    the server is then contacted without that header rather than with someone's secret."""
    if not value.startswith(SECRET_REF):
        return value
    secret = mcp_secrets.get_secret(tx, principal_id, value[len(SECRET_REF) :], origin)
    if secret is None:
        log.warning("mcp_secret_withheld", extra={"mcp_server": name, "origin": origin})
    return secret
