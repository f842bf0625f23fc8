"""The SQLite database: one file under the data dir, WAL mode, created on first use."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, create_engine

from storage import mcp_secrets, models, skills  # noqa: F401  (registers the tables)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    # WAL lets readers (stream replays) run beside the writer; NORMAL sync is durable across
    # process crashes, which is the failure we design for (not power loss mid-commit).
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


class Database:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.engine: Engine = create_engine(
            f"sqlite:///{path}", connect_args={"check_same_thread": False}
        )
        event.listen(self.engine, "connect", _sqlite_pragmas)
        SQLModel.metadata.create_all(self.engine)
        self._fast: sqlite3.Connection | None = None

    @property
    def fast(self) -> sqlite3.Connection:
        """A plain sqlite3 connection for the event log's hot path (an append per text
        delta): the ORM costs about a millisecond per write, this about 50 microseconds.
        Used only from the event-loop thread."""
        if self._fast is None:
            self._fast = sqlite3.connect(self.path, check_same_thread=False)
            _sqlite_pragmas(self._fast, None)
        return self._fast

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def close(self) -> None:
        if self._fast is not None:
            self._fast.close()
            self._fast = None
        self.engine.dispose()
