"""The schema of the first release with migrations (mcp_secret before its origin binding).

A database made before migrations existed (by `create_all`) already holds some or all of
these tables, perhaps without a column a later release added: this revision creates only the
tables, columns and indexes that are missing, so it adopts such a database in place
(storage/migrate.py).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

STR = sa.String()
# Milliseconds since 1970 and file sizes outgrow PostgreSQL's 32-bit integer.
BIG = sa.BigInteger()


def _col(
    name: str, type_: sa.types.TypeEngine, *, pk: bool = False, null: bool = False
) -> sa.Column:
    return sa.Column(name, type_, primary_key=pk, nullable=null)


def _tables() -> dict[str, tuple[list[sa.Column], list[tuple[str, bool]]]]:
    return {
        "principal": (
            [_col("id", STR, pk=True), _col("name", STR), _col("created_at", sa.Float())],
            [("name", True)],
        ),
        "apikey": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("key_hash", STR),
                _col("created_at", sa.Float()),
                _col("revoked_at", sa.Float(), null=True),
            ],
            [("principal_id", False), ("key_hash", True)],
        ),
        "harness": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("name", STR),
                _col("base", STR),
                _col("config", sa.JSON(), null=True),
                _col("created_at_ms", BIG),
                _col("is_default", sa.Boolean()),
                _col("deleted_at", sa.Float(), null=True),
            ],
            [("principal_id", False)],
        ),
        "session": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("harness_id", STR),
                _col("container_id", STR),
                _col("title", STR),
                _col("status", STR),
                _col("created_at", sa.Integer()),
                _col("updated_at", sa.Integer()),
                _col("native_session_id", STR, null=True),
                _col("active_response_id", STR, null=True),
                _col("deleted_at", sa.Float(), null=True),
            ],
            [("principal_id", False), ("harness_id", False)],
        ),
        "response": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("session_id", STR),
                _col("previous_response_id", STR, null=True),
                _col("status", STR),
                _col("store", sa.Boolean()),
                _col("model", STR),
                _col("created_at", sa.Integer()),
                _col("finished_at", sa.Float(), null=True),
                _col("input_items", sa.JSON(), null=True),
                _col("final", sa.JSON(), null=True),
                _col("deleted_at", sa.Float(), null=True),
            ],
            [("principal_id", False), ("session_id", False)],
        ),
        "event": (
            [
                _col("response_id", STR, pk=True),
                _col("seq", sa.Integer(), pk=True),
                _col("data", sa.JSON(), null=True),
            ],
            [],
        ),
        "idempotency": (
            [
                _col("principal_id", STR, pk=True),
                _col("key", STR, pk=True),
                _col("fingerprint", STR),
                _col("response_id", STR),
                _col("created_at", sa.Float()),
            ],
            [],
        ),
        "file": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("filename", STR),
                _col("bytes", BIG),
                _col("media_type", STR),
                _col("sha256", STR),
                _col("purpose", STR),
                _col("created_at", sa.Integer()),
                _col("deleted_at", sa.Float(), null=True),
            ],
            [("principal_id", False), ("sha256", False)],
        ),
        "artifact": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("session_id", STR),
                _col("container_id", STR),
                _col("response_id", STR),
                _col("filename", STR),
                _col("bytes", BIG),
                _col("media_type", STR),
                _col("sha256", STR),
                _col("created_at", sa.Integer()),
            ],
            [
                ("principal_id", False),
                ("session_id", False),
                ("container_id", False),
                ("response_id", False),
                ("sha256", False),
            ],
        ),
        "share": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("session_id", STR),
                _col("token", STR),
                _col("created_at", sa.Integer()),
            ],
            [("principal_id", False), ("session_id", False), ("token", True)],
        ),
        "door_session": (
            [
                _col("principal_id", STR, pk=True),
                _col("harness_id", STR, pk=True),
                _col("door", STR, pk=True),
                _col("external_id", STR, pk=True),
                _col("session_id", STR),
                _col("created_at", sa.Integer()),
            ],
            [("session_id", False)],
        ),
        "mcp_secret": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("value", STR),
                _col("created_at", sa.Float()),
            ],
            [("principal_id", False)],
        ),
        "skill_blob": (
            [_col("digest", STR, pk=True), _col("data", sa.LargeBinary())],
            [],
        ),
        "skill_bundle": (
            [
                _col("id", STR, pk=True),
                _col("principal_id", STR),
                _col("files", sa.JSON(), null=True),
                _col("created_at", sa.Float()),
            ],
            [("principal_id", False)],
        ),
    }


# What a column added to an existing table holds in its rows (a NOT NULL column needs one).
_FILL = {sa.String: "", sa.Integer: "0", sa.BigInteger: "0", sa.Float: "0", sa.Boolean: "0"}


def _add_missing_columns(table: str, columns: list[sa.Column], have: set[str]) -> None:
    missing = [c for c in columns if c.name not in have]
    if not missing:
        return
    with op.batch_alter_table(table) as batch:
        for column in missing:
            fill = None if column.nullable else _FILL[type(column.type)]
            default = (
                sa.false() if fill is not None and isinstance(column.type, sa.Boolean) else fill
            )
            batch.add_column(
                sa.Column(
                    column.name, column.type, nullable=column.nullable, server_default=default
                )
            )


def _index_names(inspector: sa.Inspector, table: str) -> set[str]:
    return {str(ix["name"]) for ix in inspector.get_indexes(table)}


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    existing = set(inspector.get_table_names())
    for table, (columns, indexes) in _tables().items():
        if table not in existing:
            op.create_table(table, *columns)
        else:
            have = {c["name"] for c in inspector.get_columns(table)}
            _add_missing_columns(table, columns, have)
        indexed = _index_names(inspector, table) if table in existing else set()
        for column, unique in indexes:
            name = f"ix_{table}_{column}"
            if name not in indexed:
                op.create_index(name, table, [column], unique=unique)
    indexed = _index_names(inspector, "session") if "session" in existing else set()
    if "ix_session_principal_updated" not in indexed:
        op.create_index("ix_session_principal_updated", "session", ["principal_id", "updated_at"])


def downgrade() -> None:
    for table in reversed(list(_tables())):
        op.drop_table(table)
