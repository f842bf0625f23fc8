"""Each principal's agent number: under a root server a principal's agents run as a uid of
their own, the uid range's start plus this number (uhp_server/sandbox/agent_user.py). Given
on a principal's first turn and kept; unique, so that no two principals share a uid.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {str(c["name"]) for c in sa.inspect(op.get_bind()).get_columns("principal")}
    if "agent_number" not in columns:
        with op.batch_alter_table("principal") as table:
            table.add_column(sa.Column("agent_number", sa.Integer(), nullable=True))
    indexes = {str(ix["name"]) for ix in sa.inspect(op.get_bind()).get_indexes("principal")}
    if "ix_principal_agent_number" not in indexes:
        op.create_index("ix_principal_agent_number", "principal", ["agent_number"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_principal_agent_number", "principal")
    with op.batch_alter_table("principal") as table:
        table.drop_column("agent_number")
