"""Schema migrations (Alembic, storage/migrations/): every start brings the database to head.

A database made before migrations existed (by `create_all`) has tables but no
`alembic_version`. It needs no stamping: revision 0001 creates only the tables and indexes it
lacks and 0002 adds the column it lacks, so upgrading it from the start adopts it in place.
"""

from __future__ import annotations

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine

from storage.dialect import Dialect

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision these migrations know."""
    revision = ScriptDirectory.from_config(_config()).get_current_head()
    assert revision is not None
    return revision


def current(engine: Engine) -> str | None:
    """The revision the database is at (None: not under migrations yet)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, dialect: Dialect) -> None:
    """Bring the database to head (a no-op when it is there), one process at a time
    (`Dialect.migrating`: on PostgreSQL several replicas may start at once)."""
    with engine.connect() as connection:
        dialect.migrating(connection)
        at = MigrationContext.configure(connection).get_current_revision()
        if at == head():
            return
        if at is None and inspect(connection).get_table_names():
            log.info("database_adopted", extra={"tables": inspect(connection).get_table_names()})
        command.upgrade(_config(connection), "head")
        connection.commit()
