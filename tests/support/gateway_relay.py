"""For base tests that run a CLI in the real local sandbox without a server: the sandbox
has no network but its gateway socket, so this ASGI app, served there, relays
/gateway/relay/<port>/<path> to http://127.0.0.1:<port>/<path> on the host (the scripted
provider, a test MCP server). `inside(url)` is the URL the sandbox uses for a host URL."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx

from uhp_server.sandbox.local import GATEWAY_PORT

PREFIX = "/gateway/relay/"
_HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}


def inside(url: str) -> str:
    """The sandbox's URL for a service on the host's loopback."""
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1", url
    return f"http://127.0.0.1:{GATEWAY_PORT}{PREFIX}{parts.port}{parts.path}"


def relay_app() -> Any:
    client = httpx.AsyncClient(timeout=None)

    async def app(scope: dict, receive: Any, send: Any) -> None:
        port, _, path = scope["path"].removeprefix(PREFIX).partition("/")
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [
            (k.decode(), v.decode()) for k, v in scope["headers"] if k.decode() not in _HOP_HEADERS
        ]
        query = scope.get("query_string", b"").decode()
        url = f"http://127.0.0.1:{int(port)}/{path}" + (f"?{query}" if query else "")
        request = client.build_request(scope["method"], url, headers=headers, content=body)
        response = await client.send(request, stream=True)
        out = [
            (k.encode(), v.encode())
            for k, v in response.headers.items()
            if k.lower() not in _HOP_HEADERS
        ]
        await send({"type": "http.response.start", "status": response.status_code, "headers": out})
        try:
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            await response.aclose()
        await send({"type": "http.response.body", "body": b""})

    return app
