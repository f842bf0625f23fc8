"""Memories (UHP 2026-10-04, Memories chapter): the tree of memories (`memory`), the grants
on its nodes (`memory_grant`), every version of every record (`memory_record`), and the
writes made with an Idempotency-Key (`memory_replay`).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    tables = set(sa.inspect(op.get_bind()).get_table_names())
    if "memory" not in tables:
        _create_memory()
    if "memory_grant" not in tables:
        _create_memory_grant()
    if "memory_record" not in tables:
        _create_memory_record()
    if "memory_replay" not in tables:
        _create_memory_replay()


def _create_memory() -> None:
    op.create_table(
        "memory",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("parent_id", sa.String(), nullable=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("restricted", sa.Boolean(), nullable=False),
        sa.Column("provider", sa.String(), nullable=False),
        sa.Column("owner_id", sa.String(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_memory_parent_id", "memory", ["parent_id"])
    op.create_index("ix_memory_owner_id", "memory", ["owner_id"])


def _create_memory_grant() -> None:
    op.create_table(
        "memory_grant",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("principal", sa.String(), nullable=False),
        sa.Column("privileges", sa.JSON(), nullable=True),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_memory_grant_memory_id", "memory_grant", ["memory_id"])
    op.create_index("ix_memory_grant_principal", "memory_grant", ["principal"])
    op.create_index(
        "ix_memory_grant_node_principal", "memory_grant", ["memory_id", "principal"], unique=True
    )


def _create_memory_record() -> None:
    op.create_table(
        "memory_record",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("title", sa.String(), nullable=True),
        sa.Column("content", sa.JSON(), nullable=True),
        sa.Column("attributes", sa.JSON(), nullable=True),
        sa.Column("refs", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("supersedes", sa.Integer(), nullable=True),
        sa.Column("valid_from", sa.String(), nullable=True),
        sa.Column("valid_to", sa.String(), nullable=True),
        sa.Column("written_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("invalidated_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("written_by", sa.JSON(), nullable=True),
        sa.Column("follows", sa.JSON(), nullable=True),
    )
    op.create_index("ix_memory_record_memory_status", "memory_record", ["memory_id", "status"])


def _create_memory_replay() -> None:
    op.create_table(
        "memory_replay",
        sa.Column("principal_id", sa.String(), primary_key=True),
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_replay")
    op.drop_index("ix_memory_record_memory_status", "memory_record")
    op.drop_table("memory_record")
    for index in (
        "ix_memory_grant_node_principal",
        "ix_memory_grant_principal",
        "ix_memory_grant_memory_id",
    ):
        op.drop_index(index, "memory_grant")
    op.drop_table("memory_grant")
    op.drop_index("ix_memory_owner_id", "memory")
    op.drop_index("ix_memory_parent_id", "memory")
    op.drop_table("memory")
