"""Reading a tool call's JSON body: bounded, strict, with a readable reason when it is not."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from uhp_server.doors.oumi_tools.calls import Refusal
from uhp_server.http.bodies import read_within
from uhp_server.http.strict_json import parse_strict

MAX_BODY_BYTES = 1024 * 1024  # a prompt, a session id and a little JSON-RPC around them


async def read_json(request: Request) -> Any:
    body = await read_within(request, MAX_BODY_BYTES)
    if body is None:
        raise Refusal(413, "The request body is larger than 1 MiB.")
    if not body.strip():
        raise Refusal(400, "The body must be a JSON object with a 'prompt' string.")
    try:
        return parse_strict(bytes(body))
    except ValueError as exc:
        raise Refusal(400, f"The body is not valid JSON: {str(exc)[:120]}") from None
