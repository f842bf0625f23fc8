"""The model gateway served on a Unix socket: a sandbox's only door to the server.

A sandbox with no network reaches the gateway through a socket the server serves its
gateway routes on (and nothing else of its API). Every request on a socket carries the
socket's door name in its ASGI scope (gateway.tokens.DOOR_SCOPE_KEY), and a turn's token is
bound to its door: a token copied out of one sandbox is refused on any other door, and on
the server's TCP port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn

from uhp_server.errors import error_body
from uhp_server.gateway.tokens import DOOR_SCOPE_KEY

GATEWAY_PREFIX = "/gateway/"
START_TIMEOUT = 10.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    envelope = error_body(404, "uhpserver_not_found", "Only the model gateway is here.")
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 404, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(envelope).encode()})


def gateway_only(app: ASGIApp | None, door: str) -> ASGIApp:
    """`app` restricted to the gateway's routes, each request tagged with `door`. None (a
    sandbox used without a server, as in its own tests) answers 404 to everything."""

    async def filtered(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if app is not None and scope["path"].startswith(GATEWAY_PREFIX):
            await app({**scope, DOOR_SCOPE_KEY: door}, receive, send)
            return
        await _not_found(scope, receive, send)

    return filtered


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that runs beside the main one in the same loop: the main server owns
    the process's signals, so this one must not install (and later re-raise) them."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class GatewayDoor:
    """Serves the gateway routes of an app on one Unix socket, tagged with one door name; or,
    given a listening socket (open's `sock`), on that one."""

    def __init__(self, path: Path, door: str) -> None:
        self.path = path
        self.door = door
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._on_path = True

    async def open(
        self, app: ASGIApp | None, mode: int = 0o600, sock: socket.socket | None = None
    ) -> None:
        """Serve at `path` (made with `mode`), or on `sock`, a listening socket it then owns."""
        self._on_path = sock is None
        if sock is None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()  # a socket a crashed server left
        config = uvicorn.Config(
            gateway_only(app, self.door),
            uds=str(self.path) if sock is None else None,
            lifespan="off",  # the main server runs the app's lifespan
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._server = _EmbeddedServer(config)
        sockets = None if sock is None else [sock]
        self._task = asyncio.create_task(
            self._server.serve(sockets), name=f"gateway-door-{self.door}"
        )
        try:
            async with asyncio.timeout(START_TIMEOUT):
                while not self._server.started:
                    if self._task.done():
                        self._task.result()  # raises what stopped it
                        raise RuntimeError("gateway socket server stopped while starting")
                    await asyncio.sleep(0.001)
        except BaseException:
            if sock is not None:
                sock.close()
            raise
        if sock is None:
            os.chmod(self.path, mode)

    def shut(self) -> None:
        """Refuse new connections at once; the server winds down in the background (uvicorn
        takes a tenth of a second or two, which a turn's end need not wait for)."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        for listener in getattr(self._server, "servers", []):
            listener.close()
        if self._on_path:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        _winding_down.add(self._task)
        self._task.add_done_callback(_winding_down.discard)
        self._server = self._task = None

    async def close(self) -> None:
        task = self._task
        self.shut()
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 10)


# Door servers still winding down after shut(); the sandbox awaits them as the server stops.
_winding_down: set[asyncio.Task[None]] = set()


async def wound_down() -> None:
    """Wait until every door shut so far has finished."""
    await asyncio.gather(*_winding_down, return_exceptions=True)
