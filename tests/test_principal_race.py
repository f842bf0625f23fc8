"""The first requests of a fresh server arrive together: the default principal (looked up
for UHP_API_KEY on the first authenticated request) must be created once, never a 500."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from storage import keys
from storage.db import Database
from storage.tables import Principal


def test_a_principal_created_by_a_racing_request_is_found_not_a_500(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(tmp_path / "db.sqlite3")
    token_hex = secrets.token_hex
    raced: list[str] = []

    def another_request_wins(nbytes: int) -> str:
        # Called after this lookup found no principal and before it inserts one: the racing
        # request's insert lands exactly in that window.
        if not raced:
            raced.append("prin_winner")
            winner = Principal(id="prin_winner", name=keys.DEFAULT_PRINCIPAL, created_at=0.0)
            db.run(lambda tx: tx.orm.add(winner))
        return token_hex(nbytes)

    monkeypatch.setattr(keys.secrets, "token_hex", another_request_wins)
    principal = db.run(keys.ensure_principal, keys.DEFAULT_PRINCIPAL)
    assert raced, "the race was not staged"
    assert principal.id == "prin_winner"
    assert db.run(keys.ensure_principal, keys.DEFAULT_PRINCIPAL).id == "prin_winner"
    db.close()
