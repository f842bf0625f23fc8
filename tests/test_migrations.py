"""Schema migrations: a fresh database is made by them, and a data directory of a release
from before migrations (a real one, tests/fixtures/databases/, see make_legacy.py there)
upgrades in place on first start and keeps serving what it stored."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlmodel import SQLModel, select

from harness_bases.codex import CodexBase
from storage import memory_search, migrate
from storage.db import Database
from storage.tables import McpSecretRow
from tests.support import postgres
from tests.support.app_context import app_context
from uhp_server.app import create_app
from uhp_server.settings import Settings

FIXTURES = Path(__file__).parent / "fixtures" / "databases"
AUTH = {"Authorization": "Bearer uhp_sk_legacy_fixture_key"}  # make_legacy.KEY
SECRET = "mcps_0123456789abcdef0123456789abcdef"


def schema_differences(db: Database) -> list[Any]:
    with db.engine.connect() as connection:
        found = model_differences(connection)
    # SQLite stores every integer in 64 bits: INTEGER and BIGINT are the same column there.
    return [d for d in found if not (isinstance(d, list) and d[0][0] == "modify_type")]


def model_differences(connection: Any) -> list[Any]:
    """The schema against the models, less recall's full-text index, which each dialect
    makes in its own way and no model declares (storage/memory_search.py)."""
    found = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    return [d for d in found if not _full_text_index(d)]


def _full_text_index(difference: Any) -> bool:
    if isinstance(difference, list) or not isinstance(difference, tuple):
        return False
    kind = difference[0]
    if kind == "remove_table":
        return str(difference[1].name).startswith(memory_search.INDEX_TABLE_PREFIXES)
    if kind == "remove_index":
        return str(difference[1].name).startswith(memory_search.INDEX_NAME)
    if kind == "remove_column":
        return (difference[2], difference[3].name) == memory_search.INDEX_COLUMN
    return False


def test_a_new_database_is_made_by_the_migrations_and_matches_the_models(
    tmp_path: Path,
) -> None:
    """On the database under test (UHP_TEST_DATABASE): types included, so a column too
    narrow for PostgreSQL (milliseconds in a 32-bit integer) shows here."""
    db = Database(Settings(data_dir=tmp_path).database)
    try:
        assert migrate.current(db.engine) == migrate.head()
        with db.engine.connect() as connection:
            assert model_differences(connection) == []
    finally:
        db.close()


def start(data_dir: Path) -> TestClient:
    """The fixtures are SQLite files: named, so the PostgreSQL pass also opens them."""
    settings = Settings(data_dir=data_dir, database_url=f"sqlite:///{data_dir / 'uhp.sqlite3'}")
    app = create_app(settings, bases={"codex": CodexBase()})
    return TestClient(app, raise_server_exceptions=False)


def secret_origin(http: TestClient) -> str | None:
    db = app_context(http).db
    return db.run(
        lambda tx: tx.orm.exec(select(McpSecretRow).where(McpSecretRow.id == SECRET)).one().origin
    )


@pytest.mark.parametrize(
    ("fixture", "origin"),
    [
        # The release before MCP secrets were bound to a server: no `origin`, no
        # `response.model`, no `door_session` table.
        ("before-origin.sqlite3", "https://mcp.example.com:443"),
        # The last release made by create_all: the schema is complete, only unversioned.
        ("release-09bbcea.sqlite3", None),
    ],
)
def test_a_data_dir_of_a_release_before_migrations_upgrades_in_place(
    tmp_path: Path, fixture: str, origin: str | None
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURES / fixture, data / "uhp.sqlite3")
    for _ in range(2):  # the first start upgrades, the second finds nothing to do
        with start(data) as http:
            response = http.get("/v1/responses/resp_legacy1", headers=AUTH)
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "completed"
            assert "legacy answer" in response.text
            turns = http.get("/v1/sessions/sess_legacy1/turns", headers=AUTH)
            assert turns.status_code == 200, turns.text
            assert "resp_legacy1" in turns.text
            replay = http.get("/v1/responses/resp_legacy1?stream=true", headers=AUTH)
            assert replay.status_code == 200
            assert "response.completed" in replay.text
            # The secret is bound to the server of the earliest harness that used it, not to
            # the one that re-pointed it (a release with the column keeps what it had).
            assert secret_origin(http) == origin
            db = app_context(http).db
            assert migrate.current(db.engine) == migrate.head()
            assert schema_differences(db) == []


def test_db_upgrade_migrates_a_data_dir_without_starting_the_server(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "before-origin.sqlite3", tmp_path / "uhp.sqlite3")
    env = {**os.environ, "UHP_DATABASE_URL": f"sqlite:///{tmp_path / 'uhp.sqlite3'}"}
    done = subprocess.run(
        [sys.executable, "-m", "uhp_server.cli", "db", "upgrade", "--data-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"at revision {migrate.head()} (newest: {migrate.head()})"
    db = Database(tmp_path / "uhp.sqlite3")
    try:
        assert schema_differences(db) == []
    finally:
        db.close()


@pytest.mark.skipif(
    postgres.TEST_DATABASE != "postgresql",
    reason="the PostgreSQL pass runs it (UHP_TEST_DATABASE=postgresql)",
)
def test_replicas_starting_at_once_on_an_empty_database_migrate_one_at_a_time(
    tmp_path: Path,
) -> None:
    # Without a lock both run 0001's CREATE TABLEs and one dies on a duplicate type.
    for attempt in range(3):
        name = f"uhp_test_race_{os.getpid()}_{attempt}"
        postgres._admin_execute(f"CREATE DATABASE {name}")
        try:
            env = {**os.environ, "UHP_DATABASE_URL": postgres._url(name)}
            starts = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "uhp_server.cli",
                        "db",
                        "upgrade",
                        "--data-dir",
                        str(tmp_path / f"{attempt}-{replica}"),
                    ],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for replica in range(3)
            ]
            for start in starts:
                _, err = start.communicate(timeout=120)
                assert start.returncode == 0, err[-2000:]
        finally:
            postgres._admin_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_database_from_an_unknown_release_stops_start_up_in_one_line(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "before-origin.sqlite3", tmp_path / "uhp.sqlite3")
    with sqlite3.connect(tmp_path / "uhp.sqlite3") as conn:  # as a newer release leaves it
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        conn.execute("INSERT INTO alembic_version VALUES ('9999')")
    env = {**os.environ, "UHP_DATABASE_URL": f"sqlite:///{tmp_path / 'uhp.sqlite3'}"}
    done = subprocess.run(
        [sys.executable, "-m", "uhp_server.cli", "db", "upgrade", "--data-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "not one this release knows" in done.stderr and "9999" in done.stderr


def test_records_kept_before_recall_are_found_by_it_after_the_upgrade(tmp_path: Path) -> None:
    """Migration 0014 backfills the words of every version kept before it (and, on SQLite,
    the full-text index), so recall finds what was written under 0013."""
    db = Database(Settings(data_dir=tmp_path).database)
    try:
        with db.engine.connect() as connection:
            command.downgrade(migrate._config(connection), "0013")
            connection.commit()
        with db.engine.connect() as connection:
            connection.exec_driver_sql(
                "INSERT INTO memory (id, parent_id, name, description, restricted, provider,"
                " owner_id, created_at_ms, updated_at_ms)"
                " VALUES ('hmem_old', NULL, 'Old', '', false, 'embedded', 'p', 1, 1)"
            )
            connection.exec_driver_sql(
                "INSERT INTO memory_record (id, version, memory_id, type, title, content,"
                " attributes, refs, status, written_at_ms, written_by) VALUES ('hrec_old', 1,"
                " 'hmem_old', 'fact', 'Kept before', '[{\"type\": \"text\", \"text\": \"Zanzibar"
                " ferries\"}]', '{}', '[]', 'active', 1, '{}')"
            )
            connection.commit()
        migrate.upgrade(db.engine, db.dialect)
        scope = memory_search.Scope(("hmem_old",))
        assert db.run(memory_search.by_text, scope, "zanzibar", 5) == [("hrec_old", 1)]
        assert db.run(memory_search.by_text, scope, "kept", 5) == [("hrec_old", 1)]
    finally:
        db.close()


def test_versions_kept_before_the_attribute_index_are_found_through_it_after_the_upgrade(
    tmp_path: Path,
) -> None:
    """Migration 0021 indexes the attributes of every version kept before it, by the rule
    the writes use (storage/memory_attributes.py): a filter looked up there finds them."""
    db = Database(Settings(data_dir=tmp_path).database)
    try:
        with db.engine.connect() as connection:
            command.downgrade(migrate._config(connection), "0020")
            connection.commit()
        with db.engine.connect() as connection:
            connection.exec_driver_sql(
                "INSERT INTO memory (id, parent_id, name, description, restricted, provider,"
                " owner_id, created_at_ms, updated_at_ms)"
                " VALUES ('hmem_old', NULL, 'Old', '', false, 'embedded', 'p', 1, 1)"
            )
            for version, attributes in enumerate(
                ('{"account": "acme", "seats": 5}', '{"account": "harlow"}', "[]"), start=1
            ):
                connection.exec_driver_sql(
                    "INSERT INTO memory_record (id, version, memory_id, type, content,"
                    " attributes, refs, status, written_at_ms, written_by) VALUES ('hrec_old',"
                    f" {version}, 'hmem_old', 'fact', '[]', '{attributes}', '[]', 'active', 1,"
                    " '{}')"
                )
            connection.commit()
        migrate.upgrade(db.engine, db.dialect)
        account = memory_search.Condition("attributes.account", "eq", "acme")
        assert memory_search.lookups([account]) is not None  # looked up, not read
        scope = memory_search.Scope(("hmem_old",))
        assert db.run(memory_search.by_fields, scope, [account], 5) == [("hrec_old", 1)]
        indexed = db.run(
            lambda tx: tx.rows(
                "SELECT version, name, value FROM memory_record_attribute ORDER BY version"
            )
        )
        assert [tuple(row) for row in indexed] == [(1, "account", "acme"), (2, "account", "harlow")]
    finally:
        db.close()
