"""Server paths as the Docker daemon sees them.

Bind mounts name paths on the daemon's host. When the server itself runs in a container
(compose.yaml), its data folder is a volume mounted somewhere else on that host; the
server looks up its own container's mounts once and translates through them.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path, PurePosixPath
from typing import Any

import docker.errors

log = logging.getLogger(__name__)


class HostPaths:
    def __init__(self, mounts: dict[str, str] | None = None) -> None:
        # destination inside this server's container -> source on the daemon's host
        self._mounts = dict(sorted((mounts or {}).items(), key=lambda kv: -len(kv[0])))

    @classmethod
    def detect(cls, api: Any) -> HostPaths:
        """Identity on a host; inside a container, the translation of its own mounts."""
        if not Path("/.dockerenv").exists():
            return cls()
        try:
            # Docker names a container's hostname after its id unless told otherwise.
            info = api.inspect_container(socket.gethostname())
        except docker.errors.APIError:
            # A container, but not one of this engine (e.g. a dev VM built from an image):
            # the engine sees the same paths as we do.
            log.info("docker_self_not_found: bind mounts use this machine's own paths")
            return cls()
        mounts = {m["Destination"]: m["Source"] for m in info.get("Mounts", []) if m["Source"]}
        return cls(mounts)

    def __call__(self, path: Path) -> str:
        text = str(path.resolve())
        for inside, outside in self._mounts.items():
            if text == inside or text.startswith(inside.rstrip("/") + "/"):
                rest = PurePosixPath(text).relative_to(inside)
                return str(PurePosixPath(outside) / rest)
        return text
