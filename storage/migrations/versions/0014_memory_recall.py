"""Memories recall (§6): the words of every record version (`memory_record.search_text`)
indexed for full-text search, per dialect (storage/memory_search.py), backfilled for the
versions already kept; and the memories' named queries (`memory_query`, §6.4).

SQLite: an FTS5 table `memory_record_fts` (English stemming) whose rowid is a version's
number in `memory_record_search`, both kept by triggers on `memory_record`. PostgreSQL: a
generated tsvector column `memory_record.search` with a GIN index.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from storage.memory_search import searchable

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_TOKEN = "replace(replace({}, '_', ''), '-', '')"  # as memory_search.memory_token
_SQLITE = (
    "CREATE TABLE memory_record_search ("
    " n INTEGER PRIMARY KEY, id VARCHAR NOT NULL, version INTEGER NOT NULL)",
    "CREATE UNIQUE INDEX ix_memory_record_search_version ON memory_record_search (id, version)",
    # `memory`: the memory's id as one token (memory_search.memory_token), so that a question
    # is narrowed to the memories it covers inside the index, not after it.
    # `status`: the version's, kept by a trigger, so that a question of the current records
    # needs no look at memory_record for each match.
    "CREATE VIRTUAL TABLE memory_record_fts USING fts5("
    "body, memory, status, tokenize = 'porter unicode61 remove_diacritics 2')",
    "INSERT INTO memory_record_search (id, version) SELECT id, version FROM memory_record",
    "INSERT INTO memory_record_fts (rowid, body, memory, status)"
    " SELECT s.n, coalesce(r.search_text, ''), " + _TOKEN.format("r.memory_id") + ", r.status"
    " FROM memory_record_search s JOIN memory_record r ON r.id = s.id AND r.version = s.version",
    "CREATE TRIGGER memory_record_fts_insert AFTER INSERT ON memory_record BEGIN"
    " INSERT INTO memory_record_search (id, version) VALUES (NEW.id, NEW.version);"
    " INSERT INTO memory_record_fts (rowid, body, memory, status) VALUES ("
    "  (SELECT n FROM memory_record_search WHERE id = NEW.id AND version = NEW.version),"
    "  coalesce(NEW.search_text, ''), " + _TOKEN.format("NEW.memory_id") + ", NEW.status);"
    " END",
    "CREATE TRIGGER memory_record_fts_status AFTER UPDATE OF status ON memory_record"
    " WHEN OLD.status <> NEW.status BEGIN"
    " UPDATE memory_record_fts SET status = NEW.status WHERE rowid ="
    "  (SELECT n FROM memory_record_search WHERE id = NEW.id AND version = NEW.version);"
    " END",
    "CREATE TRIGGER memory_record_fts_delete AFTER DELETE ON memory_record BEGIN"
    " DELETE FROM memory_record_fts WHERE rowid ="
    "  (SELECT n FROM memory_record_search WHERE id = OLD.id AND version = OLD.version);"
    " DELETE FROM memory_record_search WHERE id = OLD.id AND version = OLD.version;"
    " END",
)
_POSTGRESQL = (
    "ALTER TABLE memory_record ADD COLUMN search tsvector GENERATED ALWAYS AS"
    " (to_tsvector('english', coalesce(search_text, ''))) STORED",
    "CREATE INDEX ix_memory_record_search ON memory_record USING GIN (search)",
)


def upgrade() -> None:
    bind = op.get_bind()
    columns = {c["name"] for c in sa.inspect(bind).get_columns("memory_record")}
    if "search_text" not in columns:
        op.add_column("memory_record", sa.Column("search_text", sa.String(), nullable=True))
    _backfill(bind)
    # Like every revision, it adopts a database that has some of it already (a database
    # whose revision was lost is upgraded from the start: storage/migrate.py).
    tables = set(sa.inspect(bind).get_table_names())
    if bind.dialect.name == "sqlite":
        made = "memory_record_search" in tables
    else:
        made = "search" in columns
    for statement in () if made else _SQLITE if bind.dialect.name == "sqlite" else _POSTGRESQL:
        op.execute(statement)
    if "memory_query" not in tables:
        op.create_table(
            "memory_query",
            sa.Column("memory_id", sa.String(), primary_key=True),
            sa.Column("name", sa.String(), primary_key=True),
            sa.Column("description", sa.String(), nullable=False),
            sa.Column("params", sa.JSON(), nullable=True),
            sa.Column("requires", sa.String(), nullable=False),
            sa.Column("language", sa.String(), nullable=False),
            sa.Column("body", sa.String(), nullable=False),
            sa.Column("written_by", sa.JSON(), nullable=True),
            sa.Column("updated_at_ms", sa.BigInteger(), nullable=False),
        )


def _backfill(bind: sa.engine.Connection) -> None:
    """Each version kept before this revision, given the words recall matches."""
    rows = bind.execute(
        sa.text("SELECT id, version, title, content FROM memory_record WHERE search_text IS NULL")
    ).all()
    for record_id, version, title, content in rows:
        parts = json.loads(content) if isinstance(content, str) else (content or [])
        bind.execute(
            sa.text("UPDATE memory_record SET search_text = :t WHERE id = :i AND version = :v"),
            {"t": searchable(title, parts), "i": record_id, "v": version},
        )


def downgrade() -> None:
    op.drop_table("memory_query")
    if op.get_bind().dialect.name == "sqlite":
        for statement in (
            "DROP TRIGGER memory_record_fts_delete",
            "DROP TRIGGER memory_record_fts_status",
            "DROP TRIGGER memory_record_fts_insert",
            "DROP TABLE memory_record_fts",
            "DROP TABLE memory_record_search",
        ):
            op.execute(statement)
    else:
        op.execute("DROP INDEX ix_memory_record_search")
        op.execute("ALTER TABLE memory_record DROP COLUMN search")
    op.drop_column("memory_record", "search_text")
