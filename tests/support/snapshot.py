"""A copy of a running server's database as a crash would leave it, on either database."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import SQLModel

from storage.db import Database


def snapshot(source: Database, target: Path | str) -> None:
    """Copy every row of `source` (committed so far) into the new database `target`."""
    copy = Database(target)
    try:
        with source.engine.connect() as read, copy.engine.begin() as write:
            for table in SQLModel.metadata.sorted_tables:
                rows = [dict(row._mapping) for row in read.execute(table.select())]
                if rows:
                    write.execute(table.insert(), rows)
    finally:
        copy.close()
