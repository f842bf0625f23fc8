"""Alembic's environment: run by storage/migrate.py on the connection it passes in."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from storage import tables  # noqa: F401  (registers the tables)

connection = context.config.attributes["connection"]
# render_as_batch: SQLite cannot ALTER most of a table; Alembic rebuilds it instead.
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
