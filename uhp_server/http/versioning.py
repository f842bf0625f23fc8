"""Version negotiation (Lifecycle §1): every answer says which version served it.

Every version this server speaks is additive to the one before it (VERSIONING.md), so one
code path serves them all: the same routes and objects answer a request for any of them,
and the only difference a client sees is the version echoed in `UHP-Version`. A version
asked for that is not in the list is refused, never substituted: a client pinned to a
version must not be handed objects it cannot parse.

A pure ASGI middleware, so streamed responses pass through untouched and unbuffered.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from uhp_server.errors import VENDOR, error_body, new_correlation_id
from uhp_server.http.unexpected import send_json, serve_answering_failures

# Newest first: 2026-09-12 added Plugins, 2026-09-28 Environments, 2026-10-04 Memories, each
# an optional chapter (doors/uhp/chapters.py says which this server implements).
SUPPORTED_VERSIONS = ("2026-10-04", "2026-09-28", "2026-09-12", "2026-08-11")
DEFAULT_VERSION = SUPPORTED_VERSIONS[0]  # what a request without the header is served
HEADER = b"uhp-version"


class VersionMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # latin-1 decodes any bytes: a value that is not even UTF-8 is just another version
        # this server does not speak, never a failure.
        requested = next((v.decode("latin-1") for k, v in scope["headers"] if k == HEADER), None)
        served = DEFAULT_VERSION if requested is None else requested.strip()
        if served not in SUPPORTED_VERSIONS:
            await self._refuse(send)
            return
        echoed = served.encode()

        async def send_with_version(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != HEADER]
                headers.append((HEADER, echoed))
                message = {**message, "headers": headers}
            await send(message)

        await serve_answering_failures(self.app, scope, receive, send_with_version, _failed)

    @staticmethod
    async def _refuse(send: Send) -> None:
        body = error_body(
            400,
            "unsupported_protocol_version",
            "This server does not speak the requested UHP version.",
            param="UHP-Version",
            detail={"supported": list(SUPPORTED_VERSIONS)},
            correlation_id=new_correlation_id(),
        )
        await send_json(send, 400, body, [(HEADER, DEFAULT_VERSION.encode())])


def _failed(correlation_id: str) -> tuple[dict[str, Any], list[tuple[bytes, bytes]]]:
    message = "The server failed to handle this request."
    body = error_body(500, VENDOR + "internal_error", message, correlation_id=correlation_id)
    return body, []  # send_with_version adds the version header
