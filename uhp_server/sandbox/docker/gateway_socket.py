"""The model gateway on a Unix socket: the only door out of a docker sandbox.

Agent containers run with no network at all (`network_mode: none`: loopback only, no route,
no DNS). The server serves its gateway routes, and nothing else, on a Unix socket in a
folder that each container mounts read-only; a relay inside the container (socat, started by
the image's `uhp-launch`) turns 127.0.0.1:<port> into that socket. See README, "Docker
sandbox", for why this beats an internal Docker network.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from uhp_server.sandbox.gateway_door import ASGIApp, GatewayDoor

SOCKET_NAME = "gateway.sock"
RESOLV_NAME = "resolv.conf"
INSIDE_DIR = "/run/uhp-gateway"  # where the folder appears in the container (see launch.sh)
# Every container shares this socket, so a docker turn's token is bound to it: refused on
# the server's TCP port and on every local sandbox's door.
DOOR = "docker"
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes; keep a margin

# No nameserver at all: the container resolves nothing (it could reach no server anyway).
RESOLV_CONF = "# UHP sandbox: no DNS. The model gateway is the only service reachable.\n"


def socket_dir(data_dir: Path) -> Path:
    """The host folder holding the socket: under the data dir, unless that path is too long
    for a Unix socket address, then a stable folder under the temp dir."""
    preferred = data_dir.resolve() / "run" / "gateway"
    if len(str(preferred / SOCKET_NAME)) <= _SUN_PATH_MAX:
        return preferred
    digest = hashlib.sha256(str(preferred).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"uhp-gateway-{digest}"


class GatewaySocket:
    """Serves the gateway routes of the app on <folder>/gateway.sock while open."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._door = GatewayDoor(folder / SOCKET_NAME, DOOR)

    @property
    def path(self) -> Path:
        return self.folder / SOCKET_NAME

    @property
    def resolv_conf(self) -> Path:
        return self.folder / RESOLV_NAME

    async def open(self, app: ASGIApp) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o755)  # the agent's uid must reach the socket inside
        self.resolv_conf.write_text(RESOLV_CONF)
        self.resolv_conf.chmod(0o644)
        await self._door.open(app, mode=0o666)  # any uid in the container; tokens are bound

    async def close(self) -> None:
        await self._door.close()
