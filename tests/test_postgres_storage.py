"""What only PostgreSQL can do to storage: its server ends a connection under the writer or
in the pool, and it counts every connection a server leaves open. Runs in the PostgreSQL pass
(UHP_TEST_DATABASE=postgresql, scripts/test.sh)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from storage import db as db_module
from storage import responses as response_store
from storage.db import Database
from storage.models import ResponseRow
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support import postgres
from tests.support.fakes import answer
from tests.support.in_process import in_process
from uhp_server.settings import Settings

pytestmark = pytest.mark.skipif(
    postgres.TEST_DATABASE != "postgresql",
    reason="the PostgreSQL pass runs it (UHP_TEST_DATABASE=postgresql)",
)


def _end_every_connection_of(url: str) -> int:
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(postgres.ADMIN_URL, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        ).fetchone()
    assert ended is not None
    return int(ended[0])


def test_event_appends_survive_the_database_ending_the_writers_connection(
    tmp_path: Path,
) -> None:
    url = str(Settings(data_dir=tmp_path).database)
    db = Database(url)
    try:
        response_store.insert_response(
            db,
            ResponseRow(
                id="resp_1", principal_id="p", session_id="s", status="in_progress", created_at=0
            ),
        )
        event = {"type": "response.in_progress", "sequence_number": 0}
        response_store.append_events_now(db, "resp_1", [event], None)
        assert _end_every_connection_of(url) >= 1  # the writer's among them
        later = {"type": "response.in_progress", "sequence_number": 1}
        db.append_events(response_store.event_batch("resp_1", [later])).result(timeout=30)
        assert [e["sequence_number"] for e in response_store.events_after(db, "resp_1")] == [0, 1]
    finally:
        db.close()


def test_event_appends_wait_out_a_postgresql_restart(tmp_path: Path) -> None:
    # The whole cluster restarts (seconds in which no connection can open): the writer waits
    # for it, and the append made meanwhile commits once it is back.
    url = str(Settings(data_dir=tmp_path).database)
    db = Database(url)
    try:
        response_store.insert_response(
            db,
            ResponseRow(
                id="resp_2", principal_id="p", session_id="s", status="in_progress", created_at=0
            ),
        )
        event = {"type": "response.in_progress", "sequence_number": 0}
        response_store.append_events_now(db, "resp_2", [event], None)
        version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
        stopped = subprocess.run(["pg_ctlcluster", version, "main", "stop"], timeout=60)
        assert stopped.returncode == 0
        later = {"type": "response.in_progress", "sequence_number": 1}
        pending = db.append_events(response_store.event_batch("resp_2", [later]))
        time.sleep(2)  # the database stays away a while
        started = subprocess.run(["pg_ctlcluster", version, "main", "start"], timeout=60)
        assert started.returncode == 0
        pending.result(timeout=30)
        assert db.writer_alive
        assert [e["sequence_number"] for e in response_store.events_after(db, "resp_2")] == [0, 1]
    finally:
        db.close()


def test_a_pooled_connection_the_database_ended_while_idle_is_replaced_before_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pooled connections are pinged only after sitting idle (no round trip per use): one the
    # server ended meanwhile is replaced, and the session using it never sees the loss.
    monkeypatch.setattr(db_module, "IDLE_PING_SECONDS", 0.05)
    url = str(Settings(data_dir=tmp_path).database)
    db = Database(url)
    try:
        with db.session() as s:
            assert s.connection().execute(text("SELECT 1")).scalar() == 1
        assert _end_every_connection_of(url) >= 1  # the pooled one among them
        time.sleep(0.1)
        with db.session() as s:
            assert s.connection().execute(text("SELECT 2")).scalar() == 2
    finally:
        db.close()


async def test_reads_and_lone_statements_run_without_a_transaction(tmp_path: Path) -> None:
    # PostgreSQL's READ COMMITTED gives each statement its own snapshot anyway, so a read
    # opens no transaction: no BEGIN and ROLLBACK round trips around it.
    db = Database(str(Settings(data_dir=tmp_path).database))

    def autocommit(**options: bool) -> bool:
        with db.session(**options) as s:
            return bool(s.connection().connection.dbapi_connection.autocommit)  # type: ignore[union-attr]

    try:
        assert await db.read(autocommit) is True
        assert autocommit(autocommit=True) is True
        assert await db.write(autocommit) is False  # a writer's transaction is one unit
    finally:
        db.close()


async def test_a_stopped_server_leaves_no_connection_to_its_database(
    tmp_path: Path, provider: RunningProvider
) -> None:
    url = str(Settings(data_dir=tmp_path).database)
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, database_url=url) as server:
        server.base.script("short", answer("done"))
        assert (await server.submit("short")).json()["status"] == "completed"
        assert _connections_to(url) >= 1
    assert _connections_to(url) == 0


def _connections_to(url: str) -> int:
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(postgres.ADMIN_URL, autocommit=True) as admin:
        found = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchone()
    assert found is not None
    return int(found[0])
