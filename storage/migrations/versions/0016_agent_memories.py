"""Memories, the agent's part (Memories §9): a harness's memory settings (`harness_memory`)
and what a session's agent was given when it started (`session_memory`).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    tables = set(sa.inspect(op.get_bind()).get_table_names())
    if "harness_memory" not in tables:
        op.create_table(
            "harness_memory",
            sa.Column("harness_id", sa.String(), primary_key=True),
            sa.Column("default_memory_id", sa.String(), nullable=True),
            sa.Column("observe", sa.Boolean(), nullable=False),
        )
    if "session_memory" not in tables:
        op.create_table(
            "session_memory",
            sa.Column("session_id", sa.String(), primary_key=True),
            sa.Column("memory_id", sa.String(), nullable=True),
            sa.Column("primer", sa.Text(), nullable=False),
            sa.Column("primed", sa.JSON(), nullable=True),
        )


def downgrade() -> None:
    op.drop_table("session_memory")
    op.drop_table("harness_memory")
