"""The sockets of one local sandbox turn: its own door to the model gateway, and (when the
operator allows egress) to the egress proxy. Both live in a per-turn folder only the
server's uid (and, for a root server, that turn's agent uid) can enter; the sandbox sees
that folder, read-only, at INSIDE_DIR, where its relays (sandbox.py's LAUNCH) connect."""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from pathlib import Path

from uhp_server.sandbox.egress import EgressPolicy, EgressProxy
from uhp_server.sandbox.gateway_door import ASGIApp, GatewayDoor

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
    """One turn's socket folder: made by open(), gone after close()."""

    def __init__(self, parent: Path, door: str, egress: EgressPolicy) -> None:
        name = hashlib.sha256(door.encode()).hexdigest()[:_NAME_LENGTH]
        self.folder = parent / name
        self.gateway = GatewayDoor(self.folder / GATEWAY_SOCKET, door)
        self.egress = EgressProxy(self.folder / EGRESS_SOCKET, egress, door)
        self.egress_enabled = egress.enabled

    async def open(self, app: ASGIApp | None) -> None:
        self.folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder.mkdir(mode=0o700)  # a door is never shared: an existing folder is a bug
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
