"""The data directory and the database are the server's alone (storage/private.py): a fresh
data directory is 0700, the SQLite files (WAL and shm included) 0600, whatever the umask."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.db import Database
from storage.sealing import load_sealer
from tests.support.harness_api import make_client


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask (0022): files 0644 and folders 0755 unless the server says not."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("open_umask")
def test_a_fresh_data_dir_and_its_database_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with make_client(data):
        files = sorted(data.glob("uhp.sqlite3*"))
        assert {p.name for p in files} >= {"uhp.sqlite3", "uhp.sqlite3-wal", "uhp.sqlite3-shm"}
        assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    assert mode(data) == 0o700


@pytest.mark.usefixtures("open_umask")
def test_the_key_file_makes_the_data_dir_private_too(tmp_path: Path) -> None:
    load_sealer(None, tmp_path / "data")  # the first thing a start does, without a key
    assert mode(tmp_path / "data") == 0o700


@pytest.mark.usefixtures("open_umask")
def test_an_existing_database_readable_by_others_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "uhp.sqlite3"
    Database(path).close()
    path.chmod(0o644)
    Database(path).close()
    assert mode(path) == 0o600


@pytest.mark.usefixtures("open_umask")
def test_an_existing_data_dir_others_can_enter_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "shared"
    data.mkdir(mode=0o755)
    with caplog.at_level(logging.WARNING):
        Database(data / "uhp.sqlite3").close()
    assert any(r.getMessage() == "data_dir_readable_by_others" for r in caplog.records)
    assert mode(data) == 0o755  # the operator's to change


@pytest.mark.parametrize(
    "command",
    [
        ["keys", "create", "--principal", "me"],
        # A default base nothing installed stops `serve` once both files are opened.
        ["serve"],
    ],
    ids=["keys-create", "serve"],
)
@pytest.mark.usefixtures("open_umask")
def test_the_cli_gives_the_warning_with_its_advice_once(command: list[str], tmp_path: Path) -> None:
    """The warning reached stderr as the bare event, twice on `serve` (the key file and the
    database each checked the folder): its path, mode and `chmod 700` hint were dropped by
    Python's last-resort handler, the `storage` loggers having none of the server's."""
    data = tmp_path / "shared"
    data.mkdir(mode=0o755)
    env = {
        **os.environ,
        "UHP_DATA_DIR": str(data),
        "UHP_TOOLS_DIR": str(tmp_path / "no-tools"),
        "UHP_DEFAULT_BASE": "codex",
        "UHP_PORT": "1",  # never reached
    }
    done = subprocess.run(
        [sys.executable, "-m", "uhp_server.cli", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = [line for line in done.stderr.splitlines() if "data_dir_readable_by_others" in line]
    assert len(said) == 1, done.stderr
    warning = json.loads(said[0])
    assert warning["event"] == "data_dir_readable_by_others" and warning["level"] == "warning"
    assert (warning["path"], warning["mode"]) == (str(data), "0755")
    assert warning["hint"] == f"chmod 700 {data}"
