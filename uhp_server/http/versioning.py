"""Version negotiation (Lifecycle §1): every answer says which version served it.

A pure ASGI middleware, so streamed responses pass through untouched and unbuffered.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from uhp_server.errors import VENDOR, error_body, new_correlation_id
from uhp_server.http.unexpected import send_json, serve_answering_failures

SUPPORTED_VERSIONS = ("2026-08-11",)
DEFAULT_VERSION = SUPPORTED_VERSIONS[0]
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
        if requested is not None and requested.strip() not in SUPPORTED_VERSIONS:
            await self._refuse(send)
            return

        async def send_with_version(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != HEADER]
                headers.append((HEADER, DEFAULT_VERSION.encode()))
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
