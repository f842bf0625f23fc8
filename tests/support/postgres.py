"""The PostgreSQL pass (UHP_TEST_DATABASE=postgresql): every data directory a test starts a
server on gets a fresh database of its own in the local cluster (scripts/postgres.sh makes
the role), dropped when the test ends."""

from __future__ import annotations

import os
import secrets
import threading
from pathlib import Path

from sqlalchemy.engine import make_url

TEST_DATABASE = os.environ.get("UHP_TEST_DATABASE", "sqlite")
# A role that may create databases, and a database to connect to while it does.
ADMIN_URL = os.environ.get(
    "UHP_TEST_POSTGRES_URL", "postgresql://uhp_test:uhp_test@127.0.0.1:5432/postgres"
)


def _admin_execute(statement: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


class Databases:
    """One fresh database per data directory, for the length of one test."""

    def __init__(self) -> None:
        self._urls: dict[Path, str] = {}
        self._lock = threading.Lock()

    def url_for(self, data_dir: Path) -> str:
        key = data_dir.resolve()
        with self._lock:
            if key not in self._urls:
                name = "uhp_test_" + secrets.token_hex(6)
                _admin_execute(f"CREATE DATABASE {name}")
                url = make_url(ADMIN_URL).set(database=name)
                self._urls[key] = url.render_as_string(hide_password=False)
            return self._urls[key]

    def drop_all(self) -> None:
        with self._lock:
            for url in self._urls.values():
                _admin_execute(f"DROP DATABASE IF EXISTS {make_url(url).database} WITH (FORCE)")
            self._urls.clear()


# The test running now (set by the autouse fixture in tests/conftest.py), for servers started
# in a subprocess: they get the database through UHP_DATABASE_URL.
current: Databases | None = None
