"""Answers given before a request body was read close the connection.

A request refused before its body is read (401 before authentication lets the body in, 413
on a declared size, ...) would otherwise keep its connection: h11 waits for the rest of the
body before the next request may start, so a client that trickles a byte now and then holds
a connection slot for as long as it likes without ever authenticating. Marking such an answer
`Connection: close` makes uvicorn close the connection once the answer is written, and the
rest of the body is never read.

A small body (a declared length up to SMALL_BODY) is read and dropped instead, within
DRAIN_SECONDS: closing a socket with request bytes still unread makes the kernel reset the
connection, and a reset can destroy the answer before the client has read it (seen as
"connection reset by peer" under load). Draining a few bytes costs nothing, and the
connection stays usable.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CLOSE = (b"connection", b"close")
SMALL_BODY = 4096
DRAIN_SECONDS = 1.0


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, when it declares one that parses."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def declares_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


class CloseOnUnreadBody:
    """A pure ASGI middleware: streamed answers pass through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not declares_body(scope):
            await self.app(scope, receive, send)
            return
        body_read = False

        async def tracked_receive() -> Message:
            nonlocal body_read
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_read = True
            return message

        async def drained() -> bool:
            """Whether the rest of a small body was read (and dropped) in time."""
            length = declared_length(scope)
            if length is None or length > SMALL_BODY:
                return False
            try:
                async with asyncio.timeout(DRAIN_SECONDS):
                    while not body_read:
                        if (await tracked_receive())["type"] != "http.request":
                            return False  # the client went away
            except TimeoutError:
                return False
            return True

        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start" and not body_read and not await drained():
                headers = [(k, v) for k, v in message.get("headers", []) if k != CLOSE[0]]
                message = {**message, "headers": [*headers, CLOSE]}
            await send(message)

        await self.app(scope, tracked_receive, send_closing)
