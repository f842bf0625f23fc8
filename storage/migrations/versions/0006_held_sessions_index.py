"""A partial index on the sessions a turn holds: every replica's lease round looks among them
for one whose release was lost (engine/replicas/cluster.py, storage/sessions.py `release_ended`),
and without it each look reads every session and every response.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

HELD = sa.text("active_response_id IS NOT NULL")


def upgrade() -> None:
    indexes = {str(ix["name"]) for ix in sa.inspect(op.get_bind()).get_indexes("session")}
    if "ix_session_held" not in indexes:
        op.create_index(
            "ix_session_held",
            "session",
            ["active_response_id"],
            postgresql_where=HELD,
            sqlite_where=HELD,
        )


def downgrade() -> None:
    op.drop_index("ix_session_held", "session")
