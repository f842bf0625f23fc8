"""The admission slots each replica holds as a block (engine/replicas/shared_admission.py): a
replica admits its own turns from its block without a transaction each, and the line's count adds
the blocks of the live replicas to the turns admitted one by one.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {str(c["name"]) for c in sa.inspect(op.get_bind()).get_columns("replica")}
    with op.batch_alter_table("replica") as table:
        if "slots" not in columns:
            table.add_column(sa.Column("slots", sa.Integer(), nullable=False, server_default="0"))
        if "slots_op" not in columns:  # the last change of the block, by its own id
            table.add_column(sa.Column("slots_op", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("replica") as table:
        table.drop_column("slots_op")
        table.drop_column("slots")
