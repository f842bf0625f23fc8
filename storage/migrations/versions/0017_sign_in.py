"""Sign-ins (the owner's console): a browser's session, made by exchanging an API key, held
as the hash of the browser's token, with the hash of the key it came from (revoking the key
ends it) and when it expires.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "sign_in" in set(sa.inspect(op.get_bind()).get_table_names()):
        return
    op.create_table(
        "sign_in",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("principal_id", sa.String(), nullable=False),
        sa.Column("key_hash", sa.String(), nullable=False),
        sa.Column("csrf_token", sa.String(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_sign_in_principal_id", "sign_in", ["principal_id"])
    op.create_index("ix_sign_in_key_hash", "sign_in", ["key_hash"])
    op.create_index("ix_sign_in_expires_at", "sign_in", ["expires_at"])


def downgrade() -> None:
    op.drop_table("sign_in")
