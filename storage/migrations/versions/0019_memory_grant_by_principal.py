"""A caller's grants read by principal, from an index that holds the memory too (issue 29).

Access reads the grants of the caller's principals to find where it enters the tree. With
only `principal` indexed, SQLite's planner, once ANALYZE has seen one principal holding most
grants (a tenant with 175,000 memories), scanned the whole (memory_id, principal) index for
any principal's grants instead: another tenant's listing then took 40 ms instead of 3. An
index on (principal, memory_id) answers that read from the index alone, for any principal;
it replaces the one on `principal`, which is its prefix.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

NEW, OLD = "ix_memory_grant_principal_node", "ix_memory_grant_principal"


def upgrade() -> None:
    indexes = {str(ix["name"]) for ix in sa.inspect(op.get_bind()).get_indexes("memory_grant")}
    if NEW not in indexes:
        op.create_index(NEW, "memory_grant", ["principal", "memory_id"])
    if OLD in indexes:
        op.drop_index(OLD, "memory_grant")


def downgrade() -> None:
    op.create_index(OLD, "memory_grant", ["principal"])
    op.drop_index(NEW, "memory_grant")
