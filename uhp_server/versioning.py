"""Version negotiation (Lifecycle §1): every answer says which version served it.

A pure ASGI middleware, so streamed responses pass through untouched and unbuffered.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from uhp_server.errors import VENDOR, error_body, new_correlation_id

SUPPORTED_VERSIONS = ("2026-08-11",)
DEFAULT_VERSION = SUPPORTED_VERSIONS[0]
HEADER = b"uhp-version"

log = logging.getLogger("uhp_server.errors")


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

        started = False

        async def send_with_version(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v) for k, v in message.get("headers", []) if k != HEADER]
                headers.append((HEADER, DEFAULT_VERSION.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_version)
        except ClientDisconnect:
            # The client left mid-body: no answer is owed to it, nothing failed here.
            log.debug("client_disconnected", extra={"path": scope.get("path")})
        except Exception:
            # Answered here rather than by Starlette's outermost error middleware, which would
            # drop the version header and re-raise, closing the client's connection.
            correlation_id = new_correlation_id()
            log.exception(
                "unhandled_error",
                extra={"correlation_id": correlation_id, "path": scope.get("path")},
            )
            if not started:
                body = error_body(
                    500,
                    VENDOR + "internal_error",
                    "The server failed to handle this request.",
                    correlation_id=correlation_id,
                )
                await self._send_json(send, 500, body)

    @classmethod
    async def _refuse(cls, send: Send) -> None:
        body = error_body(
            400,
            "unsupported_protocol_version",
            "This server does not speak the requested UHP version.",
            param="UHP-Version",
            detail={"supported": list(SUPPORTED_VERSIONS)},
            correlation_id=new_correlation_id(),
        )
        await cls._send_json(send, 400, body)

    @staticmethod
    async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (HEADER, DEFAULT_VERSION.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})
