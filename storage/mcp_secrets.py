"""Credentials of MCP servers (`auth`, sensitive `headers`), kept apart from harness config.

A harness stores and returns only a reference (`uhp-secret:<id>`); the value is read here
when a turn starts and goes to the gateway, never to a client or a sandbox. References are
scoped to the principal, so a reference copied between that principal's harnesses works and
one from another principal does not.

Each secret is also bound to the origin (scheme, host, port) of the URL it was stored with:
a reference is write-only for its value but not for where the value goes, so without the
binding anyone holding the principal's API key could point a stored credential at a server
of their own and read it there. A reference is only ever good for its own origin; for any
other, the client must send the credential itself again.

The value is stored sealed (storage/sealing.py), bound to its principal, id and origin: the
origin column is checked before opening, and is also part of what the seal authenticates, so
someone who can write the database but has no key cannot redirect a credential by editing
that column either (the value then opens nowhere).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlmodel import select

from storage.sealing import SealingError
from storage.tables import McpSecretRow
from storage.unit import Tx

log = logging.getLogger(__name__)

SECRET_PREFIX = "mcps_"
SECRET_REF = "uhp-secret:"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def url_origin(url: str) -> str:
    """`scheme://host:port` of a URL, normalised (lower case, the default port spelled out),
    so that two spellings of the same server compare equal."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if ":" in host:  # an IPv6 literal keeps its brackets, as in a URL
        host = f"[{host}]"
    port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    return f"{scheme}://{host}:{port}"


def new_secret_id() -> str:
    return SECRET_PREFIX + secrets.token_hex(16)


def _context(principal_id: str, secret_id: str, origin: str | None) -> str:
    """What a sealed value is bound to: it opens on its own row, for its own origin, only."""
    return f"mcp_secret:{principal_id}:{secret_id}:{origin or ''}"


def put_secret(tx: Tx, principal_id: str, value: str, secret_id: str, origin: str) -> None:
    tx.orm.add(
        McpSecretRow(
            id=secret_id,
            principal_id=principal_id,
            value=tx.sealer.seal(value, _context(principal_id, secret_id, origin)),
            created_at=time.time(),
            origin=origin,
        )
    )


def get_secret_row(tx: Tx, principal_id: str, secret_id: str) -> McpSecretRow | None:
    """The stored secret, only for the principal it belongs to."""
    row = tx.orm.get(McpSecretRow, secret_id)
    if row is None or row.principal_id != principal_id:
        return None
    return row


def get_secret(tx: Tx, principal_id: str, secret_id: str, origin: str) -> str | None:
    """The value, only for its principal and only for the origin it was stored with."""
    row = get_secret_row(tx, principal_id, secret_id)
    if row is None or row.origin is None or row.origin != origin:
        return None
    try:
        return tx.sealer.open(row.value, _context(row.principal_id, row.id, row.origin))
    except SealingError as exc:
        log.error("mcp_secret_unreadable", extra={"secret": secret_id, "reason": str(exc)})
        return None


@dataclass(frozen=True)
class Resealed:
    resealed: int  # sealed again with the key that seals now
    unreadable: int  # sealed with a key this server does not have: left as they are


def reseal(tx: Tx) -> Resealed:
    """Seal again, with the key that seals now, every secret that is not: those stored
    before secrets were sealed, and those of a key being rotated out."""
    resealed = unreadable = 0
    for row in tx.orm.exec(select(McpSecretRow)).all():
        if tx.sealer.is_current(row.value):
            continue
        context = _context(row.principal_id, row.id, row.origin)
        try:
            row.value = tx.sealer.seal(tx.sealer.open(row.value, context), context)
        except SealingError:
            unreadable += 1
            continue
        tx.orm.add(row)
        resealed += 1
    return Resealed(resealed, unreadable)


def secret_references(raw_config: Any) -> list[tuple[str, str]]:
    """(secret id, origin of its server's URL) for every reference in a harness config."""
    try:
        config = json.loads(raw_config) if isinstance(raw_config, str) else raw_config
        found = []
        for server in config.get("mcpServers") or []:
            origin = url_origin(server["url"])
            values = [server.get("auth"), *(server.get("headers") or {}).values()]
            for value in values:
                if isinstance(value, str) and value.startswith(SECRET_REF):
                    found.append((value[len(SECRET_REF) :], origin))
        return found
    except (AttributeError, KeyError, TypeError, ValueError):
        return []  # a config this code cannot read binds nothing
