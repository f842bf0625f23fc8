"""A replica given an answer together with a fresh model connection, for a turn paused on
another replica, asks that replica to park the turn (`relayed_question.park_requested`) and
carries it on itself in a new turn: a connection's key never enters the database, so it
cannot be relayed with the answer (engine/replicas/answer_relay.py, docs/scale-out.md §3). A door
then finds the response that carries its task on by the `previous_response_id` that points back at
the parked one: `ix_response_previous_response_id`.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {str(c["name"]) for c in sa.inspect(op.get_bind()).get_columns("relayed_question")}
    if "park_requested" not in columns:
        with op.batch_alter_table("relayed_question") as table:
            table.add_column(
                sa.Column("park_requested", sa.Boolean(), nullable=False, server_default=sa.false())
            )
    indexes = {str(ix["name"]) for ix in sa.inspect(op.get_bind()).get_indexes("response")}
    if "ix_response_previous_response_id" not in indexes:
        op.create_index("ix_response_previous_response_id", "response", ["previous_response_id"])


def downgrade() -> None:
    op.drop_index("ix_response_previous_response_id", "response")
    with op.batch_alter_table("relayed_question") as table:
        table.drop_column("park_requested")
