"""Recall by meaning on PostgreSQL (pgvector): a version's vector is kept as `real[]` there
(cast to pgvector's `vector` where compared: storage/memory_vectors.py), and the `vector`
extension is created in the database when the cluster has it and this user may create it.
SQLite is unchanged (its vectors stay float32 BLOBs for sqlite-vec).

No vector was ever kept on PostgreSQL before this revision (the embedded provider wrote one
only where it could rank by meaning, which was SQLite alone), so the column changes type on
an empty table.

The extension is created only where it can be: a cluster without pgvector, or a user who may
not create it (it is not a trusted extension: a superuser creates it), leaves the migration
whole; the server then declares no `query` and says why at start-up, and a superuser's
`CREATE EXTENSION vector` later is all it takes (the vectors' column does not need it).

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, REAL

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    columns = {c["name"]: c for c in sa.inspect(bind).get_columns("memory_record_vector")}
    if not isinstance(columns["embedding"]["type"], ARRAY):
        op.execute("DELETE FROM memory_record_vector")  # none (above); the USING needs none
        op.alter_column(
            "memory_record_vector",
            "embedding",
            type_=ARRAY(REAL()),
            postgresql_using="NULL::real[]",
        )
    _create_pgvector(bind)


def _create_pgvector(bind: sa.Connection) -> None:
    """CREATE EXTENSION vector when the cluster has it, inside a savepoint: refused (this user
    is no superuser), the migration goes on and start-up says what is missing."""
    if bind.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first():
        return
    if not bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).first():
        log.warning("pgvector_not_installed: recall by meaning needs it on PostgreSQL")
        return
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
    except sa.exc.DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0]
        log.warning(f"pgvector_not_created: {reason}")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    # The extension stays (other schemas may use it); the vectors go with their column type.
    op.execute("DELETE FROM memory_record_vector")
    op.alter_column(
        "memory_record_vector",
        "embedding",
        type_=sa.LargeBinary(),
        postgresql_using="NULL::bytea",
    )
