"""Recall by meaning (Memories §6.2 `query`): each record version's vector, written with it by
the embedded provider when an embedder is configured (storage/memory_vectors.py): the model
that made it, its dimensions and its float32s. A version kept before this revision has none
(recall by meaning counts it in `degraded`).

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "memory_record_vector" in set(sa.inspect(op.get_bind()).get_table_names()):
        return
    op.create_table(
        "memory_record_vector",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("dimensions", sa.Integer(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
    )
    op.create_index("ix_memory_record_vector_memory", "memory_record_vector", ["memory_id"])


def downgrade() -> None:
    op.drop_table("memory_record_vector")
