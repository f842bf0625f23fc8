"""Credentials of MCP servers (`auth`, sensitive `headers`), kept apart from harness config.

A harness stores and returns only a reference (`uhp-secret:<id>`); the value is read here
when a turn starts and goes to the gateway, never to a client or a sandbox. References are
scoped to the principal, so a reference copied between that principal's harnesses works and
one from another principal does not.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from sqlmodel import Field, SQLModel

if TYPE_CHECKING:  # storage.db imports this module to register its tables
    from storage.db import Database

SECRET_PREFIX = "mcps_"


class McpSecretRow(SQLModel, table=True):
    __tablename__ = "mcp_secret"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    value: str
    created_at: float


def new_secret_id() -> str:
    return SECRET_PREFIX + secrets.token_hex(16)


def put_secret(db: Database, principal_id: str, value: str, secret_id: str) -> None:
    with db.session() as s:
        s.add(
            McpSecretRow(
                id=secret_id, principal_id=principal_id, value=value, created_at=time.time()
            )
        )
        s.commit()


def get_secret(db: Database, principal_id: str, secret_id: str) -> str | None:
    with db.session() as s:
        row = s.get(McpSecretRow, secret_id)
        if row is None or row.principal_id != principal_id:
            return None
        return row.value
