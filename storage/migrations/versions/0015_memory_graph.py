"""Memories (UHP 2026-10-04): the references of every version kept by their target, for the
graph's incoming edges (`memory_reference`, Memories §6.6); the files a version names
(`memory_file_use`, §4.3, §7); and snapshots, names for an instant (`memory_snapshot`, §5.3).
The references of the versions already written are indexed here.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    tables = set(sa.inspect(op.get_bind()).get_table_names())
    if "memory_reference" not in tables:
        _create_memory_reference()
        _index_existing_references()
    if "memory_file_use" not in tables:
        _create_memory_file_use()
    if "memory_snapshot" not in tables:
        _create_memory_snapshot()


def _create_memory_reference() -> None:
    op.create_table(
        "memory_reference",
        sa.Column("record_id", sa.String(), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("position", sa.Integer(), primary_key=True),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("target_record_id", sa.String(), nullable=False),
    )
    op.create_index("ix_memory_reference_memory_id", "memory_reference", ["memory_id"])
    op.create_index(
        "ix_memory_reference_target_record_id", "memory_reference", ["target_record_id"]
    )


def _index_existing_references() -> None:
    bind = op.get_bind()
    records = sa.table(
        "memory_record",
        sa.column("id", sa.String()),
        sa.column("version", sa.Integer()),
        sa.column("memory_id", sa.String()),
        sa.column("refs", sa.JSON()),
    )
    index = sa.table(
        "memory_reference",
        sa.column("record_id", sa.String()),
        sa.column("version", sa.Integer()),
        sa.column("position", sa.Integer()),
        sa.column("memory_id", sa.String()),
        sa.column("target_record_id", sa.String()),
    )
    found = bind.execute(
        sa.select(records.c.id, records.c.version, records.c.memory_id, records.c.refs)
    )
    rows = [
        {
            "record_id": record_id,
            "version": version,
            "position": position,
            "memory_id": memory_id,
            "target_record_id": ref["record_id"],
        }
        for record_id, version, memory_id, refs in found
        for position, ref in enumerate(refs or [])
        if isinstance(ref, dict) and isinstance(ref.get("record_id"), str)
    ]
    if rows:
        bind.execute(index.insert(), rows)


def _create_memory_file_use() -> None:
    op.create_table(
        "memory_file_use",
        sa.Column("record_id", sa.String(), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("file_id", sa.String(), primary_key=True),
        sa.Column("memory_id", sa.String(), nullable=False),
    )
    op.create_index("ix_memory_file_use_file_id", "memory_file_use", ["file_id"])
    op.create_index("ix_memory_file_use_memory_id", "memory_file_use", ["memory_id"])


def _create_memory_snapshot() -> None:
    op.create_table(
        "memory_snapshot",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("written_by", sa.JSON(), nullable=True),
    )
    op.create_index("ix_memory_snapshot_memory_id", "memory_snapshot", ["memory_id"])


def downgrade() -> None:
    op.drop_table("memory_snapshot")
    op.drop_table("memory_file_use")
    op.drop_table("memory_reference")
