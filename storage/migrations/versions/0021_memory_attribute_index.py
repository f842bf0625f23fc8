"""Recall by fields (Memories §6.2 `filters`) looks attributes up in an index (issue 29):
each version's top-level attributes holding a string, one row each (`memory_record_attribute`,
storage/memory_attributes.py), by (name, value, memory). A question by an attribute then reads
the versions holding the value in the memories it covers, not every version there. The
versions already kept are indexed here, by the rule the writes use.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from storage.memory_attributes import indexable

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

TABLE = "memory_record_attribute"
CHUNK = 5000  # versions read at a time while the ones already kept are indexed


def upgrade() -> None:
    if TABLE in set(sa.inspect(op.get_bind()).get_table_names()):
        return
    op.create_table(
        TABLE,
        sa.Column("record_id", sa.String(), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("value", sa.String(), nullable=False),
        sqlite_with_rowid=False,  # its rows are its key: no second copy of them
    )
    _index_existing_versions()
    op.create_index("ix_memory_record_attribute_value", TABLE, ["name", "value", "memory_id"])
    op.create_index("ix_memory_record_attribute_memory", TABLE, ["memory_id"])


def _index_existing_versions() -> None:
    bind = op.get_bind()
    records = sa.table(
        "memory_record",
        sa.column("id", sa.String()),
        sa.column("version", sa.Integer()),
        sa.column("memory_id", sa.String()),
        sa.column("attributes", sa.Text()),  # as kept: one that is not JSON is left out
    )
    index = sa.table(
        TABLE,
        sa.column("record_id", sa.String()),
        sa.column("version", sa.Integer()),
        sa.column("name", sa.String()),
        sa.column("memory_id", sa.String()),
        sa.column("value", sa.String()),
    )
    found = bind.execute(
        sa.select(records.c.id, records.c.version, records.c.memory_id, records.c.attributes)
    )
    while chunk := found.fetchmany(CHUNK):
        rows = [
            {"record_id": i, "version": v, "name": name, "memory_id": m, "value": value}
            for i, v, m, kept in chunk
            for name, value in _attributes(kept).items()
            if indexable(name, value)
        ]
        if rows:
            bind.execute(index.insert(), rows)


def _attributes(kept: object) -> dict[str, object]:
    try:
        value = json.loads(kept) if isinstance(kept, (str, bytes)) else kept
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def downgrade() -> None:
    op.drop_table(TABLE)
