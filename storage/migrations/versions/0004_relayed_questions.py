"""Questions a paused turn waits on, readable by every replica, and the answers one replica
takes for a turn that runs on another (engine/replicas/answer_relay.py, docs/scale-out.md §3).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "relayed_question" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "relayed_question",
        sa.Column("response_id", sa.String(), primary_key=True),
        sa.Column("call_id", sa.String(), primary_key=True),
        sa.Column("arguments", sa.String(), nullable=False),
        sa.Column("answer", sa.String(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("relayed_question")
