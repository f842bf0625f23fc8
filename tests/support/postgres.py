"""The PostgreSQL pass (UHP_TEST_DATABASE=postgresql): every data directory a test starts a
server on gets a fresh database of its own in the local cluster (scripts/postgres.sh makes
the role), dropped when the test ends."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy.engine import make_url

from storage.db import Database

TEST_DATABASE = os.environ.get("UHP_TEST_DATABASE", "sqlite")
# A role that may create databases, and a database to connect to while it does.
ADMIN_URL = os.environ.get(
    "UHP_TEST_POSTGRES_URL", "postgresql://uhp_test:uhp_test@127.0.0.1:5432/postgres"
)


def end_connections_to(url: str) -> int:
    """End every connection to the database of `url`, as a restart or an administrator does
    (pg_terminate_backend); how many there were."""
    import psycopg

    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        ).fetchone()
    assert ended is not None
    return int(ended[0])


def _admin_execute(statement: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)


def _url(name: str) -> str:
    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)


# Drops take a second or more each on a busy machine: they run behind the tests, and the
# process waits for them at exit.
_dropper = ThreadPoolExecutor(1, thread_name_prefix="drop-test-database")
_template: str | None = None
_template_lock = threading.Lock()


def _migrated_template() -> str:
    """A database at the newest revision, made once per test process: each test's database
    is a copy of it (a copy costs a fraction of running the migrations again)."""
    global _template
    with _template_lock:
        if _template is None:
            name = "uhp_test_template_" + secrets.token_hex(6)
            _admin_execute(f"CREATE DATABASE {name}")
            Database(_url(name)).close()
            atexit.register(_admin_execute, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            _template = name
        return _template


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
                _admin_execute(f"CREATE DATABASE {name} TEMPLATE {_migrated_template()}")
                self._urls[key] = _url(name)
            return self._urls[key]

    def drop_all(self) -> None:
        with self._lock:
            for url in self._urls.values():
                statement = f"DROP DATABASE IF EXISTS {make_url(url).database} WITH (FORCE)"
                _dropper.submit(_admin_execute, statement)
            self._urls.clear()


# The test running now (set by the autouse fixture in tests/conftest.py), for servers started
# in a subprocess: they get the database through UHP_DATABASE_URL.
current: Databases | None = None


@contextlib.contextmanager
def bare_database() -> Iterator[str]:
    """The URL of a new, empty database made from template0: none of the extensions
    scripts/postgres.sh creates in template1 (pgvector), as on a cluster whose administrator
    created none; dropped at the end."""
    name = "uhp_test_bare_" + secrets.token_hex(6)
    _admin_execute(f"CREATE DATABASE {name} TEMPLATE template0")
    try:
        yield _url(name)
    finally:
        _admin_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
