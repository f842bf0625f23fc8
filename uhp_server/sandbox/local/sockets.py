"""The doors of one local sandbox turn: to the model gateway, and (when the operator allows
egress) to the egress proxy.

Under a root server both listen on the sandbox's own loopback, made inside its network
namespace by the server (netns.py). An unprivileged server serves them on Unix sockets in a
per-turn folder only the server's uid can enter; the sandbox sees that folder, read-only, at
INSIDE_DIR, where its relays (sandbox.py's LAUNCH) connect."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

from uhp_server.sandbox.egress import EgressPolicy, EgressProxy
from uhp_server.sandbox.gateway_door import ASGIApp, GatewayDoor
from uhp_server.sandbox.local import netns

INSIDE_DIR = "/run/uhp"
GATEWAY_SOCKET = "gateway.sock"
EGRESS_SOCKET = "egress.sock"
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes; keep a margin
_NAME_LENGTH = 16


def fits_socket_path(parent: Path) -> bool:
    """Whether a turn folder in `parent` can hold its sockets (a Unix socket address is short)."""
    return len(str(parent / ("x" * _NAME_LENGTH) / GATEWAY_SOCKET)) <= _SUN_PATH_MAX


def run_dir(data_dir: Path) -> Path:
    """Where turn folders go: under the data dir, unless a socket path there would be too
    long for a Unix socket address; then a stable folder under the temp dir."""
    preferred = data_dir.resolve() / "run" / "local"
    if fits_socket_path(preferred):
        return preferred
    digest = hashlib.sha256(str(preferred).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"uhp-local-{digest}"


class TurnSockets:
    """One turn's doors: served by open() (in a socket folder) or open_inside() (in the
    sandbox's network namespace), gone after close()."""

    def __init__(self, parent: Path, door: str, egress: EgressPolicy) -> None:
        name = hashlib.sha256(door.encode()).hexdigest()[:_NAME_LENGTH]
        self.folder = parent / name
        self.gateway = GatewayDoor(self.folder / GATEWAY_SOCKET, door)
        self.egress = EgressProxy(self.folder / EGRESS_SOCKET, egress, door)
        self.egress_enabled = egress.enabled

    def make_folder(self) -> None:
        """The folder alone (the sandbox binds it), before open() serves in it."""
        self.folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder.mkdir(mode=0o700)  # a door is never shared: an existing folder is a bug

    async def open(self, app: ASGIApp | None) -> None:
        """Serve both in the folder (make_folder() first)."""
        try:
            await self.gateway.open(app)
            if self.egress_enabled:
                await self.egress.open()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self.gateway.shut()
        await self.egress.close()
        with contextlib.suppress(OSError):
            self.folder.rmdir()

    async def open_inside(self, pid: int, app: ASGIApp | None, ports: Sequence[int]) -> None:
        """Serve the gateway on 127.0.0.1:ports[0] inside the network namespace of process
        `pid` (the sandbox's), and the egress proxy on ports[1] when it is enabled."""
        wanted = list(ports[:2] if self.egress_enabled else ports[:1])
        listeners = await asyncio.to_thread(netns.listen_inside, pid, wanted)
        try:
            await self.gateway.open(app, sock=listeners[0])
            if self.egress_enabled:
                await self.egress.open(sock=listeners[1])
        except BaseException:
            for listener in listeners:  # (closing one twice is harmless)
                listener.close()
            await self.close()
            raise
