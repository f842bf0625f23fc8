"""The model gateway on a Unix socket: the only door out of a docker sandbox.

Agent containers run with no network at all (`network_mode: none`: loopback only, no route,
no DNS). The server serves its gateway routes, and nothing else, on a Unix socket in a
folder that each container mounts read-only; a relay inside the container (socat, started by
the image's `uhp-launch`) turns 127.0.0.1:<port> into that socket. See README, "Docker
sandbox", for why this beats an internal Docker network.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import tempfile
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn

from uhp_server.errors import error_body

log = logging.getLogger(__name__)

SOCKET_NAME = "gateway.sock"
RESOLV_NAME = "resolv.conf"
INSIDE_DIR = "/run/uhp-gateway"  # where the folder appears in the container (see launch.sh)
GATEWAY_PREFIX = "/gateway/"
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes; keep a margin
START_TIMEOUT = 10.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

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


def gateway_only(app: ASGIApp) -> ASGIApp:
    """`app` restricted to the gateway's routes: the sandbox reaches nothing else of the API."""

    async def filtered(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(GATEWAY_PREFIX):
            await app(scope, receive, send)
            return
        if scope["type"] == "http":
            envelope = error_body(404, "uhpserver_not_found", "Only the model gateway is here.")
            body = json.dumps(envelope).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": body})

    return filtered


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that runs beside the main one in the same loop: the main server owns
    the process's signals, so this one must not install (and later re-raise) them."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[override]
        yield


class GatewaySocket:
    """Serves the gateway routes of the app on <folder>/gateway.sock while open."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None

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
        config = uvicorn.Config(
            gateway_only(app),
            uds=str(self.path),
            lifespan="off",  # the main server runs the app's lifespan
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
        self._server = _EmbeddedServer(config)
        self._task = asyncio.create_task(self._server.serve(), name="gateway-socket")
        async with asyncio.timeout(START_TIMEOUT):
            while not self._server.started:
                if self._task.done():
                    self._task.result()  # raises what stopped it
                    raise RuntimeError("gateway socket server stopped while starting")
                await asyncio.sleep(0.01)
        self.path.chmod(0o666)  # any uid in the container; the gateway checks its token

    async def close(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._task, 10)
        self._server = self._task = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
