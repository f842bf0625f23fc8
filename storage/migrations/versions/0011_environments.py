"""Environments (UHP 2026-09-28): a principal's projects (`environment`), each build of one
(`environment_version`), and the environment and version a session and each of its turns read
(`session.environment_*`, `response.environment_*`).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# The columns a session and a response gain: which environment, which version.
READERS = ("session", "response")


def upgrade() -> None:
    tables = set(sa.inspect(op.get_bind()).get_table_names())
    if "environment" not in tables:
        _create_environment()
    if "environment_version" not in tables:
        _create_environment_version()
    for table_name in READERS:
        columns = {str(c["name"]) for c in sa.inspect(op.get_bind()).get_columns(table_name)}
        if "environment_id" in columns:
            continue
        with op.batch_alter_table(table_name) as table:
            table.add_column(sa.Column("environment_id", sa.String(), nullable=True))
            table.add_column(sa.Column("environment_version", sa.Integer(), nullable=True))


def _create_environment() -> None:
    op.create_table(
        "environment",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("principal_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("slug", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("entry", sa.String(), nullable=False),
        sa.Column("declared", sa.JSON(), nullable=True),
        sa.Column("runtime", sa.JSON(), nullable=True),
        sa.Column("active_version", sa.Integer(), nullable=True),
        sa.Column("latest_version", sa.Integer(), nullable=True),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_environment_principal_id", "environment", ["principal_id"])
    op.create_index("ix_environment_slug", "environment", ["principal_id", "slug"], unique=True)


def _create_environment_version() -> None:
    op.create_table(
        "environment_version",
        sa.Column("environment_id", sa.String(), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("packages", sa.JSON(), nullable=True),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
    )


def downgrade() -> None:
    for table_name in READERS:
        with op.batch_alter_table(table_name) as table:
            table.drop_column("environment_version")
            table.drop_column("environment_id")
    op.drop_table("environment_version")
    op.drop_index("ix_environment_slug", "environment")
    op.drop_index("ix_environment_principal_id", "environment")
    op.drop_table("environment")
