"""Secrets at rest (storage/sealing.py): an MCP server's credentials are sealed in the
database, so a copy of it holds none; the keys come from UHP_SECRETS_KEY or a 0600 key file;
rotation; secrets stored before sealing still read and are sealed at the next start."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from storage import mcp_secrets
from storage.db import Database
from storage.harnesses import get_harness
from storage.sealing import Sealer, SealingError, key_file, load_sealer, new_key
from storage.tables import McpSecretRow
from storage.unit import Tx
from tests.support.harness_api import AUTH, create, ctx, make_client, principal_id
from uhp_server.cli import main
from uhp_server.harnesses.runtime import turn_mcp_targets
from uhp_server.settings import Settings

TOKEN = "tok-at-rest-secret-1"
HEADER = "hdr-at-rest-secret-2"
SERVER = {
    "name": "vault",
    "url": "https://mcp.example.com/mcp",
    "auth": f"Bearer {TOKEN}",
    "headers": {"X-Api-Key": HEADER},
}


def raw_database(data: Path) -> bytes:
    """The database as a copy or backup would hold it: SQLite's file and its WAL, every
    byte; PostgreSQL's dump (the PostgreSQL pass)."""
    database = Settings(data_dir=data).database
    if isinstance(database, str) and database.startswith("postgresql"):
        dump = subprocess.run(["pg_dump", database], capture_output=True, check=True)
        assert b"COPY public.mcp_secret" in dump.stdout
        return dump.stdout
    files = sorted(data.glob("uhp.sqlite3*"))
    assert files
    return b"".join(p.read_bytes() for p in files)


def targets(http: TestClient, harness_id: str) -> dict[str, str]:
    row = ctx(http).db.run(get_harness, principal_id(http), harness_id)
    assert row is not None
    found = ctx(http).db.run(turn_mcp_targets, row.principal_id, row.config["mcpServers"], False)
    return dict(found[0].headers)


def stored_values(http: TestClient) -> list[str]:
    return ctx(http).db.run(lambda tx: [r.value for r in tx.orm.exec(select(McpSecretRow))])


EXPECTED = {"X-Api-Key": HEADER, "Authorization": f"Bearer {TOKEN}"}


def test_a_copied_database_holds_no_usable_credential(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with make_client(data) as http:
        harness = create(http, {"base": "codex", "mcp_servers": [SERVER]})
        assert targets(http, harness["id"]) == EXPECTED  # the turn still gets them
        got = http.get(f"/v1/harnesses/{harness['id']}", headers=AUTH).json()
        assert TOKEN not in str(got) and HEADER not in str(got)  # write-only in the API
        assert all(v.startswith("uhp-sealed:v1:") for v in stored_values(http))
        written = raw_database(data)
    for secret in (TOKEN, HEADER):
        assert secret.encode() not in written
    assert TOKEN.encode() not in raw_database(data)  # nor after the checkpoint at close
    # The key is beside the database, never in it, and readable by the server's user only.
    path = key_file(data)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip().encode() not in written


def test_another_key_opens_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with make_client(data) as http:
        harness = create(http, {"base": "codex", "mcp_servers": [SERVER]})
    key_file(data).unlink()  # the database copied elsewhere, without its key
    with make_client(data, secrets_key=new_key()) as http:
        assert targets(http, harness["id"]) == {}  # withheld, not garbage sent upstream


def test_a_secret_stored_before_sealing_reads_and_is_sealed_at_the_next_start(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with make_client(data) as http:
        harness = create(http, {"base": "codex", "mcp_servers": [SERVER]})

        def unsealed(tx: Tx) -> None:  # as an older release stored them
            for row in tx.orm.exec(select(McpSecretRow)).all():
                context = mcp_secrets._context(row.principal_id, row.id, row.origin)
                row.value = tx.sealer.open(row.value, context)
                tx.orm.add(row)

        ctx(http).db.run(unsealed)
        assert set(stored_values(http)) == {TOKEN, HEADER}
        assert targets(http, harness["id"]) == EXPECTED  # read as they are
    with make_client(data) as http:
        assert all(v.startswith("uhp-sealed:v1:") for v in stored_values(http))
        assert targets(http, harness["id"]) == EXPECTED
    assert TOKEN.encode() not in raw_database(data)


def test_a_sealed_credential_does_not_follow_an_edited_origin(tmp_path: Path) -> None:
    """Someone who can write the database but has no key points a stored credential at a
    server of their own by editing its row's origin: the seal binds the origin, so it opens
    for neither."""
    evil = "https://evil.example:443"
    with make_client(tmp_path / "data") as http:
        create(http, {"base": "codex", "mcp_servers": [SERVER]})

        def redirected(tx: Tx) -> list[str | None]:
            rows = tx.orm.exec(select(McpSecretRow)).all()
            for row in rows:
                row.origin = evil
                tx.orm.add(row)
            tx.orm.flush()
            return [mcp_secrets.get_secret(tx, r.principal_id, r.id, evil) for r in rows]

        assert ctx(http).db.run(redirected) == [None, None]


def test_rotating_keys_in_the_environment(tmp_path: Path) -> None:
    data, old, new = tmp_path / "data", new_key(), new_key()
    with make_client(data, secrets_key=old) as http:
        harness = create(http, {"base": "codex", "mcp_servers": [SERVER]})
        sealed_before = set(stored_values(http))
    assert not key_file(data).exists()  # the environment's key: no file made
    with make_client(data, secrets_key=f"{new},{old}") as http:  # the new key first
        assert targets(http, harness["id"]) == EXPECTED
        assert not set(stored_values(http)) & sealed_before  # sealed again at start
    with make_client(data, secrets_key=new) as http:  # the old key is no longer needed
        assert targets(http, harness["id"]) == EXPECTED


def test_the_rotate_command_puts_a_new_key_first_in_the_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.delenv("UHP_SECRETS_KEY", raising=False)
    with make_client(data) as http:
        harness = create(http, {"base": "codex", "mcp_servers": [SERVER]})
        first = key_file(data).read_text().split()
        assert main(["secrets", "rotate", "--data-dir", str(data)]) == 0
        keys = key_file(data).read_text().split()
        assert keys[1:] == first and len(keys) == 2
        assert stat.S_IMODE(key_file(data).stat().st_mode) == 0o600
        # The running server reads the file again for the key it did not know.
        assert targets(http, harness["id"]) == EXPECTED
    sealer = Sealer(keys[:1])  # the new key alone opens every stored secret now
    db = Database(Settings(data_dir=data).database, sealer)
    try:
        values = db.run(lambda tx: list(tx.orm.exec(select(McpSecretRow)).all()))
        assert all(sealer.is_current(row.value) for row in values)
    finally:
        db.close()


def test_new_key_prints_a_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["secrets", "new-key"]) == 0
    printed = capsys.readouterr().out.strip()
    Sealer([printed])  # a key it takes


# -- the sealer itself -----------------------------------------------------------------------


def test_a_sealed_value_opens_only_on_its_own_row() -> None:
    sealer = Sealer([new_key()])
    sealed = sealer.seal("value-1", "mcp_secret:p1:s1")
    assert "value-1" not in sealed
    assert sealer.seal("value-1", "mcp_secret:p1:s1") != sealed  # a fresh nonce each time
    assert sealer.open(sealed, "mcp_secret:p1:s1") == "value-1"
    with pytest.raises(SealingError):
        sealer.open(sealed, "mcp_secret:p2:s1")  # copied onto another principal's row
    with pytest.raises(SealingError):
        Sealer([new_key()]).open(sealed, "mcp_secret:p1:s1")


def test_any_listed_key_opens_and_the_first_seals() -> None:
    old, new = new_key(), new_key()
    sealed = Sealer([old]).seal("v", "c")
    both = Sealer([new, old])
    assert both.open(sealed, "c") == "v"
    assert not both.is_current(sealed)
    assert both.is_current(both.seal("v", "c"))


@pytest.mark.parametrize("bad", ["", "short", "x" * 44, "A" * 40])
def test_a_key_that_is_not_one_is_refused(bad: str) -> None:
    with pytest.raises(SealingError):
        Sealer([bad])


def test_the_key_file_is_made_once(tmp_path: Path) -> None:
    first = load_sealer(None, tmp_path)
    again = load_sealer(None, tmp_path)
    assert first.current_id == again.current_id
    assert stat.S_IMODE(key_file(tmp_path).stat().st_mode) == 0o600


def test_a_database_opened_without_a_key_stores_no_secret(tmp_path: Path) -> None:
    db = Database(tmp_path / "db.sqlite3")
    try:
        with pytest.raises(SealingError):
            db.run(mcp_secrets.put_secret, "p", "value-123", "mcps_x", "https://a:443")
    finally:
        db.close()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_key_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = key_file(tmp_path)
    load_sealer(None, tmp_path)
    path.chmod(mode)
    with pytest.raises(SealingError, match=f"{path}.*chmod 600"):
        load_sealer(None, tmp_path)


def test_the_server_does_not_start_with_a_key_file_others_can_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    load_sealer(None, tmp_path)
    key_file(tmp_path).chmod(0o644)
    monkeypatch.setenv("UHP_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("UHP_SECRETS_KEY", raising=False)
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: pytest.fail("the server started"))
    assert main(["serve"]) == 2
    assert "chmod 600" in capsys.readouterr().err
