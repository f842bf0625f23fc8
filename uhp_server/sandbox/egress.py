"""The egress proxy: the one way from a sandbox to hosts the operator allowed.

A sandbox has no network of its own. When UHP_EGRESS_ALLOW_HOSTS names hosts (say, the
team's package registries), each turn gets a second socket, relayed to 127.0.0.1:3128
inside (local and docker sandboxes alike), where this proxy speaks HTTP CONNECT (for https)
and plain-HTTP forwarding. It decides at connect time: the host must be on the list, and
every address it resolves to must pass gateway/url_policy.py's rules (no link-local ever;
no private or loopback address unless UHP_EGRESS_ALLOW_PRIVATE_HOSTS), and the connection
goes to the address that was checked. Each connection is logged once: host, port, allowed
or refused, bytes each way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from uhp_server.gateway.url_policy import EGRESS_SETTING, UrlRefused, pin_url, refusal

log = logging.getLogger(__name__)

EGRESS_PROXY_PORT = 3128  # where a sandbox's relay to the proxy listens, inside
NO_PROXY = "127.0.0.1,localhost"  # the gateway itself is never proxied
MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
CHUNK = 64 * 1024


@dataclass(frozen=True)
class EgressPolicy:
    allow_hosts: frozenset[str] = frozenset()
    allow_private: bool = False

    @classmethod
    def from_settings(cls, hosts: str, allow_private: bool) -> EgressPolicy:
        names = {_normal(h) for h in hosts.split(",") if h.strip()}
        return cls(frozenset(names), allow_private)

    @property
    def enabled(self) -> bool:
        return bool(self.allow_hosts)

    def allows(self, host: str) -> bool:
        return _normal(host) in self.allow_hosts


def with_proxy(env: dict[str, str], policy: EgressPolicy) -> dict[str, str]:
    """`env` plus the conventional proxy variables when the policy allows any egress."""
    if not policy.enabled:
        return dict(env)
    proxy = f"http://127.0.0.1:{EGRESS_PROXY_PORT}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
    return {**env, **dict.fromkeys(names, proxy), "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}


def _normal(host: str) -> str:
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


@dataclass
class _Request:
    method: str
    host: str
    port: int
    head: bytes  # what to send upstream first (plain HTTP); empty for CONNECT


class _BadRequest(ValueError):
    pass


def _parse_head(head: bytes) -> _Request:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _BadRequest("malformed request line")
    method, target, version = parts
    if method == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not (port.isascii() and port.isdigit()):
            raise _BadRequest("CONNECT needs host:port")
        return _Request(method, _normal(host), int(port), b"")
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise _BadRequest("a forward proxy request needs an absolute http:// URL")
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    kept = [
        line
        for line in lines[1:]
        if line and not line.lower().startswith(("proxy-", "connection:", "keep-alive:"))
    ]
    # One request per connection: the next one may name another host.
    out = [f"{method} {path} {version}", *kept, "Connection: close", "", ""]
    return _Request(method, _normal(url.hostname), url.port or 80, "\r\n".join(out).encode())


class EgressProxy:
    """Serves the proxy on one Unix socket for one sandbox (named by `door` in its logs)."""

    def __init__(self, path: Path, policy: EgressPolicy, door: str) -> None:
        self.path = path
        self.policy = policy
        self.door = door
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._on_path = True

    async def open(self, sock: socket.socket | None = None) -> None:
        """Serve at `path`, or on `sock`, a listening socket it then owns."""
        if sock is not None:
            self._on_path = False
            self._server = await asyncio.start_server(self._accept, sock=sock, limit=MAX_HEAD_BYTES)
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._server = await asyncio.start_unix_server(
            self._accept, path=str(self.path), limit=MAX_HEAD_BYTES
        )
        os.chmod(self.path, 0o600)

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        self._server = None
        if self._on_path:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            request = _parse_head(head)
        except (asyncio.LimitOverrunError, _BadRequest, UnicodeError, ValueError) as exc:
            await _answer(writer, 400, f"Bad proxy request: {exc}")
            return
        address, refusal = await self._decide(request.host, request.port)
        if address is None:
            self._log(request, False, 0, 0, refusal)
            await _answer(writer, 403, f"Egress to {request.host} is not allowed: {refusal}")
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(address, request.port), CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError):
            self._log(request, True, 0, 0, "connection failed")
            await _answer(writer, 502, f"Could not connect to {request.host}:{request.port}.")
            return
        if request.method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(request.head)
        sent, received = await _splice(reader, writer, up_reader, up_writer)
        self._log(request, True, len(request.head) + sent, received, None)

    async def _decide(self, host: str, port: int) -> tuple[str | None, str]:
        if not self.policy.allows(host):
            return None, "the host is not on the server's egress allow-list"
        literal = f"[{host}]" if ":" in host else host
        try:
            pinned = await pin_url(f"http://{literal}:{port}/", self.policy.allow_private)
        except UrlRefused as exc:
            return None, refusal(exc, EGRESS_SETTING).replace("The URL", "The host")
        return pinned.address, ""

    def _log(self, request: _Request, allowed: bool, sent: int, received: int, why: str | None):
        log.info(
            "egress",
            extra={
                "door": self.door,
                "host": request.host,
                "port": request.port,
                "method": request.method,
                "allowed": allowed,
                "bytes_sent": sent,
                "bytes_received": received,
                **({"reason": why} if why else {}),
            },
        )


async def _answer(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (message + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()


async def _splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> tuple[int, int]:
    """Copy both ways until both sides are done; returns (bytes sent up, bytes received)."""

    async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> int:
        total = 0
        try:
            while chunk := await source.read(CHUNK):
                sink.write(chunk)
                await sink.drain()
                total += len(chunk)
            if sink.can_write_eof():
                sink.write_eof()
        except (ConnectionError, OSError):
            pass
        return total

    try:
        sent, received = await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
    finally:
        up_writer.close()
    return sent, received
