"""Bind each MCP secret to the origin of the server it was stored for (storage/mcp_secrets.py).

A secret of an older database is bound to the server of the earliest harness of its
principal that uses it: one re-pointed later (what the binding stops) does not get it. A
secret no harness uses stays unbound, good for nothing.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

from storage.mcp_secrets import secret_references

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)


def upgrade() -> None:
    bind = op.get_bind()
    columns = {c["name"] for c in sa.inspect(bind).get_columns("mcp_secret")}
    if "origin" in columns:  # adopted from a release that added it without migrations
        return
    with op.batch_alter_table("mcp_secret") as batch:
        batch.add_column(sa.Column("origin", sa.String(), nullable=True))
    owners: dict[str, str] = dict(
        bind.execute(sa.text("SELECT id, principal_id FROM mcp_secret")).all()
    )
    bound: dict[str, str] = {}
    harnesses = bind.execute(
        sa.text("SELECT principal_id, config FROM harness ORDER BY created_at_ms, id")
    )
    for principal_id, raw in harnesses:
        for secret_id, origin in secret_references(raw):
            if owners.get(secret_id) == principal_id and secret_id not in bound:
                bound[secret_id] = origin
    for secret_id, origin in bound.items():
        bind.execute(
            sa.text("UPDATE mcp_secret SET origin = :origin WHERE id = :id"),
            {"origin": origin, "id": secret_id},
        )
    log.info("mcp_secret_origins_added", extra={"bound": len(bound), "secrets": len(owners)})


def downgrade() -> None:
    with op.batch_alter_table("mcp_secret") as batch:
        batch.drop_column("origin")
