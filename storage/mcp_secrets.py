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
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlmodel import Field, SQLModel

if TYPE_CHECKING:  # storage.db imports this module to register its tables
    from storage.db import Database

log = logging.getLogger(__name__)

SECRET_PREFIX = "mcps_"
SECRET_REF = "uhp-secret:"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class McpSecretRow(SQLModel, table=True):
    __tablename__ = "mcp_secret"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    value: str
    created_at: float
    # url_origin() of the server URL the secret was stored for; None only for a secret of
    # an older database that no harness used (see _add_origin_column): good for nothing.
    origin: str | None = None


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


def put_secret(db: Database, principal_id: str, value: str, secret_id: str, origin: str) -> None:
    with db.session() as s:
        s.add(
            McpSecretRow(
                id=secret_id,
                principal_id=principal_id,
                value=value,
                created_at=time.time(),
                origin=origin,
            )
        )
        s.commit()


def get_secret_row(db: Database, principal_id: str, secret_id: str) -> McpSecretRow | None:
    """The stored secret, only for the principal it belongs to."""
    with db.session() as s:
        row = s.get(McpSecretRow, secret_id)
        if row is None or row.principal_id != principal_id:
            return None
        return row


def get_secret(db: Database, principal_id: str, secret_id: str, origin: str) -> str | None:
    """The value, only for its principal and only for the origin it was stored with."""
    row = get_secret_row(db, principal_id, secret_id)
    if row is None or row.origin is None or row.origin != origin:
        return None
    return row.value


# -- databases from before the origin binding ----------------------------------------------
@event.listens_for(SQLModel.metadata, "after_create")
def _add_origin_column(_target: Any, connection: Connection, **_kw: Any) -> None:
    """create_all() adds missing tables, never missing columns: add `origin` to the table of
    an older database, and bind each of its secrets to the server it was configured for."""
    columns = {row[1] for row in connection.execute(text("PRAGMA table_info(mcp_secret)"))}
    if not columns or "origin" in columns:
        return
    connection.execute(text("ALTER TABLE mcp_secret ADD COLUMN origin VARCHAR"))
    owners: dict[str, str] = dict(
        connection.execute(text("SELECT id, principal_id FROM mcp_secret")).all()
    )
    bound: dict[str, str] = {}
    harnesses = connection.execute(
        text("SELECT principal_id, config FROM harness ORDER BY created_at_ms, id")
    )
    for principal_id, raw in harnesses:
        for secret_id, origin in _references(raw):
            # The earliest harness to use a secret is taken as where it was stored: one that
            # was re-pointed later (what this binding stops) does not get it.
            if owners.get(secret_id) == principal_id and secret_id not in bound:
                bound[secret_id] = origin
    for secret_id, origin in bound.items():
        connection.execute(
            text("UPDATE mcp_secret SET origin = :origin WHERE id = :id"),
            {"origin": origin, "id": secret_id},
        )
    log.info("mcp_secret_origins_added", extra={"bound": len(bound), "secrets": len(owners)})


def _references(raw_config: Any) -> list[tuple[str, str]]:
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
