"""An index on the response's place in the shared admission line: every admission counts the
slots held and looks for turns waiting, and without it each look reads every response ever
run (engine/replicas/shared_admission.py).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    indexes = {str(ix["name"]) for ix in sa.inspect(op.get_bind()).get_indexes("response")}
    if "ix_response_admission" not in indexes:
        op.create_index("ix_response_admission", "response", ["admission"])


def downgrade() -> None:
    op.drop_index("ix_response_admission", "response")
