"""An unexpected failure while serving a request: logged once, under the correlation id the
client is given, and answered in the caller's own error format when nothing was sent yet.

Starlette's outermost error middleware would answer in plain text (no client of ours reads
that) and re-raise, closing the connection; each surface wraps its app with this instead:
versioning.py for UHP's envelope, the Chat Completions door for OpenAI's shape.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from uhp_server.errors import new_correlation_id

log = logging.getLogger("uhp_server.errors")

# (correlation id) -> the error body and the headers to send with the 500
FailureAnswer = Callable[[str], tuple[dict[str, Any], list[tuple[bytes, bytes]]]]


async def serve_answering_failures(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, answer: FailureAnswer
) -> None:
    started = False

    async def watched(message: Message) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        await app(scope, receive, watched)
    except ClientDisconnect:
        # The client left mid-body: no answer is owed to it, nothing failed here.
        log.debug("client_disconnected", extra={"path": scope.get("path")})
    except Exception:
        correlation_id = new_correlation_id()
        log.exception(
            "unhandled_error", extra={"correlation_id": correlation_id, "path": scope.get("path")}
        )
        if not started:
            body, headers = answer(correlation_id)
            await send_json(send, 500, body, headers)


async def send_json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
