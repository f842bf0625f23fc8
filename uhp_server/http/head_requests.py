"""`HEAD` wherever `GET` is served (RFC 9110 §9.3.2): the GET answer's status and headers,
no body.

FastAPI's routes declare only the methods they name, so without this a HEAD got 405. The
request runs as a GET; once its headers are sent the answer is ended, so a streamed GET (an
event stream) stops there instead of running on with nobody reading.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        ended = False

        async def send_headers_only(message: Message) -> None:
            nonlocal ended
            if ended:
                return
            await send(message)
            if message["type"] == "http.response.start":
                ended = True
                # The server writes no body for a HEAD; this ends the answer, after which the
                # server tells the app the client is gone (a streamed GET stops).
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        await self.app({**scope, "method": "GET"}, receive, send_headers_only)
