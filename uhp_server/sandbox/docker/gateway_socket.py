"""The model gateway on a Unix socket: the only door out of a docker sandbox.

Agent containers run with no network at all (`network_mode: none`: loopback only, no route,
no DNS). The server serves its gateway routes, and nothing else, on a Unix socket of the
turn's own, in a folder only that turn's container mounts (read-only); the turn's token is
bound to that socket and refused anywhere else. A relay inside the container (socat,
started by the image's `uhp-launch`) turns 127.0.0.1:<port> into the socket. See README,
"Docker sandbox", for why this beats an internal Docker network.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from uhp_server.sandbox.egress import EgressPolicy, EgressProxy
from uhp_server.sandbox.gateway_door import ASGIApp, GatewayDoor

SOCKET_NAME = "gateway.sock"
EGRESS_SOCKET_NAME = "egress.sock"  # launch.sh relays it when present
RESOLV_NAME = "resolv.conf"
INSIDE_DIR = "/run/uhp-gateway"  # where the folder appears in the container (see launch.sh)
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes; keep a margin
_TURN_NAME_LENGTH = 16

# No nameserver at all: the container resolves nothing (it could reach no server anyway).
RESOLV_CONF = "# UHP sandbox: no DNS. The model gateway is the only service reachable.\n"


def socket_dir(data_dir: Path) -> Path:
    """The host folder holding the socket: under the data dir, unless that path is too long
    for a Unix socket address, then a stable folder under the temp dir."""
    preferred = data_dir.resolve() / "run" / "gateway"
    if len(str(preferred / ("x" * _TURN_NAME_LENGTH) / SOCKET_NAME)) <= _SUN_PATH_MAX:
        return preferred
    digest = hashlib.sha256(str(preferred).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"uhp-gateway-{digest}"


class GatewaySocket:
    """The folder of the turns' gateway sockets: one socket per turn, in a subfolder that
    only the turn's container mounts, served while the turn runs."""

    def __init__(self, folder: Path, egress: EgressPolicy = EgressPolicy()) -> None:  # noqa: B008
        self.folder = folder
        self.egress = egress
        self._app: ASGIApp | None = None
        self._open: dict[str, TurnSocket] = {}

    @property
    def resolv_conf(self) -> Path:
        return self.folder / RESOLV_NAME

    async def open(self, app: ASGIApp) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o755)  # each turn's folder then admits only its agent's uid
        self.resolv_conf.write_text(RESOLV_CONF)
        self.resolv_conf.chmod(0o644)
        self._app = app

    async def open_turn(
        self,
        door: str,
        owner: tuple[int, int],
        files: Mapping[str, bytes] | None = None,
        prepared: str | None = None,
    ) -> TurnSocket:
        """Serve the gateway for one turn on a socket only `owner` (uid, gid) can reach,
        beside `files` (a path in the container -> its contents) for the container to mount.
        `prepared`: the name of a folder prepare_folder() made (a ready pool's slot, whose
        container already mounts it), served in place of a new one."""
        turn = TurnSocket(self.folder, door, self.egress, name=prepared)
        await turn.open(self._app, owner, files or {}, prepared=prepared is not None)
        self._open[door] = turn
        return turn

    def prepare_folder(
        self, name: str, owner: tuple[int, int], files: Mapping[str, bytes]
    ) -> dict[str, Path]:
        """A turn's folder made ahead, with its `files`, before any door is known (a ready
        pool's slot: its container mounts the folder at start). Returns the files as
        TurnSocket.files does. remove_folder() undoes it when no turn served it."""
        folder = self.folder / name
        folder.mkdir(mode=0o700)
        try:
            made = write_files(folder, files)
            os.chown(folder, *owner)
        except BaseException:
            self.remove_folder(name)
            raise
        return made

    def remove_folder(self, name: str) -> None:
        folder = self.folder / name
        for child in folder.glob("*"):
            child.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            folder.rmdir()

    async def close_turn(self, turn: TurnSocket) -> None:
        self._open.pop(turn.door.door, None)
        await turn.close()

    async def close(self) -> None:
        for turn in list(self._open.values()):
            await self.close_turn(turn)


class TurnSocket:
    """<folder>/<hash of the door>/: what one container mounts at INSIDE_DIR, holding its
    gateway.sock and, when egress is allowed, its egress.sock."""

    def __init__(
        self, parent: Path, door: str, egress: EgressPolicy, name: str | None = None
    ) -> None:
        """`name`: the folder's (GatewaySocket.prepare_folder's); None, named after the door."""
        name = name or hashlib.sha256(door.encode()).hexdigest()[:_TURN_NAME_LENGTH]
        self.folder = parent / name
        self.door = GatewayDoor(self.folder / SOCKET_NAME, door)
        self.egress = EgressProxy(self.folder / EGRESS_SOCKET_NAME, egress, door)
        self.egress_enabled = egress.enabled
        self.files: dict[str, Path] = {}  # a path in the container -> its file here

    async def open(
        self,
        app: ASGIApp | None,
        owner: tuple[int, int],
        files: Mapping[str, bytes],
        prepared: bool = False,
    ) -> None:
        """`prepared`: the folder and its files are there already (prepare_folder)."""
        if not prepared:
            self.folder.mkdir(mode=0o700)
        try:
            if prepared:
                self.files = {inside: file_path(self.folder, inside) for inside in files}
            else:
                self.files = write_files(self.folder, files)
            await self.door.open(app, mode=0o600)
            sockets = [self.door.path]
            if self.egress_enabled:
                await self.egress.open()
                sockets.append(self.egress.path)
            for path in (self.folder, *sockets):
                os.chown(path, *owner)  # the container's uid; the server's own when not root
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self.door.shut()
        await self.egress.close()
        for here in self.files.values():
            here.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.folder.rmdir()


def file_path(folder: Path, inside: str) -> Path:
    """Where the file mounted at `inside` in the container is kept in a turn's folder."""
    return folder / ("file-" + Path(inside).name)


def write_files(folder: Path, files: Mapping[str, bytes]) -> dict[str, Path]:
    """Write `files` (a path in the container -> its contents) into `folder`, readable by
    the container's uid; returns a path in the container -> its file here."""
    made: dict[str, Path] = {}
    for inside, data in files.items():
        here = file_path(folder, inside)
        here.write_bytes(data)
        here.chmod(0o644)
        made[inside] = here
    return made
