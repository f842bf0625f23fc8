"""No orphans: every agent container carries its server's id, and a starting (or stopping)
server removes whatever of its own is still there, e.g. after it was killed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import docker.errors

from uhp_server.ops.replica_id import ID_FILE, stored_id  # noqa: F401 (ID_FILE: for callers)
from uhp_server.sandbox.docker.container import LABEL_SERVER

log = logging.getLogger(__name__)


def server_id(data_dir: Path) -> str:
    """This server's id, kept in its data folder: stable across restarts, and distinct for
    two servers that share one Docker engine (each reaps only its own containers)."""
    return stored_id(data_dir)


def owned_containers(api: Any, owner: str) -> list[str]:
    """Ids of every container (running or not) labelled with this server's id."""
    found = api.containers(all=True, quiet=True, filters={"label": f"{LABEL_SERVER}={owner}"})
    return [c["Id"] for c in found]


def reap(api: Any, owner: str) -> int:
    """Remove every container of this server. Returns how many were removed."""
    removed = 0
    for container_id in owned_containers(api, owner):
        try:
            api.remove_container(container_id, force=True)
            removed += 1
        except docker.errors.NotFound:
            pass  # auto-removed meanwhile
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise
    if removed:
        log.warning("docker_reaped_leftovers", extra={"count": removed})
    return removed
