"""This server process's id among replicas: on its turns' rows, its lease, its containers."""

from __future__ import annotations

import secrets
from pathlib import Path

# Named for the docker sandbox, which kept the id first: containers of earlier releases carry it.
ID_FILE = "docker-sandbox-id"


def stored_id(data_dir: Path, file_name: str = ID_FILE) -> str:
    """The id kept in the data folder (in `file_name`): stable across restarts, made on first
    use."""
    path = data_dir / file_name
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(8)
    path.write_text(value + "\n")
    return value


def replica_id(configured: str | None, data_dir: Path) -> str:
    """UHP_REPLICA_ID, else the id kept in the data folder (one replica per data folder)."""
    return configured or stored_id(data_dir)
