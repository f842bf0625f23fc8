"""Environments' retention: when a version's folder was garbage-collected (its record stays,
its folder goes; a collected version cannot be activated again).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {str(c["name"]) for c in sa.inspect(op.get_bind()).get_columns("environment_version")}
    if "collected_at" not in columns:
        with op.batch_alter_table("environment_version") as table:
            table.add_column(sa.Column("collected_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("environment_version") as table:
        table.drop_column("collected_at")
