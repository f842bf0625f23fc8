"""Re-priming (Memories §9.1): a session whose CLI compacted its conversation is marked
(`session_memory.reprime`), and its next turn places a priming block computed afresh.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {str(c["name"]) for c in sa.inspect(op.get_bind()).get_columns("session_memory")}
    if "reprime" not in columns:
        with op.batch_alter_table("session_memory") as table:
            # A replica of the release before writes rows without it: false, as it was.
            table.add_column(
                sa.Column("reprime", sa.Boolean(), nullable=False, server_default=sa.false())
            )


def downgrade() -> None:
    with op.batch_alter_table("session_memory") as table:
        table.drop_column("reprime")
