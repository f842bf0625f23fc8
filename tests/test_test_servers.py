"""The test harness runs the server it says it runs: the passes of scripts/test.sh differ only
in environment variables, so a pass that silently tested the default would pass for nothing."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import API_KEY, TEST_REPLICAS
from tests.support import postgres
from tests.support.server import ServerProcess, query

pytestmark = pytest.mark.slow


def test_the_shared_server_stores_in_the_database_under_test(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}) as c:
        assert c.get("/v1/sessions").status_code == 200
    expected = "postgresql" if postgres.TEST_DATABASE == "postgresql" else "sqlite"
    assert server.database.startswith(expected)
    assert query(server.database, "SELECT 1") == [(1,)]
    sqlite_file = server.data_dir / "uhp.sqlite3"
    assert sqlite_file.exists() == (expected == "sqlite")


def test_the_shared_server_is_as_many_replicas_as_asked(server: ServerProcess) -> None:
    served_by = set()
    with httpx.Client(base_url=server.url) as client:
        for _ in range(2 * TEST_REPLICAS):
            served_by.add(client.get("/healthz").headers.get("X-Served-By"))
    assert served_by == ({f"r{n}" for n in range(TEST_REPLICAS)} if TEST_REPLICAS > 1 else {None})
