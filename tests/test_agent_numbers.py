"""Each principal's agent number, its agents' uid under a root server
(uhp_server/sandbox/agent_user.py): given once, never shared, kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import keys
from storage.db import Database
from storage.tables import Principal
from storage.unit import Tx
from tests.support import postgres
from uhp_server.context import agent_number_of
from uhp_server.sandbox.agent_user import host_ids_within


def database(tmp_path: Path) -> Database:
    """The database under test (UHP_TEST_DATABASE): SQLite, or a fresh PostgreSQL one."""
    if postgres.current is not None:
        return Database(postgres.current.url_for(tmp_path))
    return Database(tmp_path / "db.sqlite3")


async def test_principals_get_numbers_of_their_own_and_keep_them(tmp_path: Path) -> None:
    db = database(tmp_path)
    a = db.run(keys.ensure_principal, "alice").id
    b = db.run(keys.ensure_principal, "bob").id
    assert [await agent_number_of(db, p) for p in (a, b, a, b)] == [0, 1, 0, 1]
    db.close()
    again = database(tmp_path)  # a restart: the numbers were stored
    assert await agent_number_of(again, b) == 1
    again.close()


async def test_a_number_taken_meanwhile_is_not_given_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = database(tmp_path)
    a = db.run(keys.ensure_principal, "alice").id
    b = db.run(keys.ensure_principal, "bob").id
    real = keys.agent_number
    raced: list[bool] = []

    def taken_by_a_racing_turn(tx: Tx, principal_id: str) -> int:
        # Another principal's first turn commits number 0 after this one found it free.
        if not raced:
            raced.append(True)
            db.run(lambda t: t.execute("UPDATE principal SET agent_number = 0 WHERE id = ?", (a,)))
            row = tx.orm.get(Principal, principal_id)
            assert row is not None
            row.agent_number = 0
            tx.orm.add(row)
            tx.orm.flush()
        return real(tx, principal_id)

    monkeypatch.setattr(keys, "agent_number", taken_by_a_racing_turn)
    assert await agent_number_of(db, b) == 1
    assert raced
    db.close()


def test_host_ids_inside_the_uid_range_are_found(tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text(
        "root:x:0:0::/root:/bin/sh\nbuilder:x:200005:200005::/home/b:/bin/sh\n"
    )
    (tmp_path / "group").write_text("root:x:0:\n")
    # Debian's default layout: the second user's subordinate ids reach into the range.
    (tmp_path / "subuid").write_text("alice:100000:65536\nbob:165536:65536\n")
    found = host_ids_within((200000, 299999), tmp_path)
    assert found == ["passwd: builder (200005)", "subuid: bob (165536-231071)"]
    assert host_ids_within((300000, 399999), tmp_path) == []
