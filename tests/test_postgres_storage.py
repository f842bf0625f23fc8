"""What only PostgreSQL can do to storage: its server ends a connection under the writer.
Runs in the PostgreSQL pass (UHP_TEST_DATABASE=postgresql, scripts/test.sh)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from storage import responses as response_store
from storage.db import Database
from storage.models import ResponseRow
from tests.support import postgres
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
