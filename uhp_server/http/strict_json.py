"""Strict request bodies: JSON the way the protocol means it, never more than we accept, and
never before the caller has authenticated.

Python's json module accepts NaN and Infinity, reads 1e999 as an infinity, and decodes
`\\ud800` into a lone surrogate; none can be stored or sent back as JSON, so such a body
used to fail only after the task had already run. Every JSON body is checked here, before
any handler sees it.

FastAPI reads and parses a body before it resolves a route's dependencies, authentication
among them, so anyone could make the server hold a body of the maximum size. A route that
needs a principal therefore authenticates here, first, and a refused caller's body is never
read.

A JSON body is parsed once: the value is left where FastAPI and `request.json()` find it and
the raw bytes are let go, so a route reads a JSON body with `request.json()`, never
`request.body()`.
"""

from __future__ import annotations

import email.message
import json
import math
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationInfo

from uhp_server.errors import VENDOR, ApiError
from uhp_server.http.auth import require_principal
from uhp_server.http.bodies import read_within

MAX_DEPTH = 64  # no protocol object comes near this
# Stands in for a body already parsed into Request._json: FastAPI only tests that there was a
# body. Not JSON, so code that reads `request.body()` instead of `request.json()` fails loudly.
_PARSED = b"<parsed: read request.json()>"
_Endpoint = TypeVar("_Endpoint", bound=Callable[..., Any])


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds an unpaired surrogate") from None


def check_json(value: Any) -> None:
    """Raise ValueError for anything JSON cannot carry faithfully (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError("the body is nested too deeply")
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, float) and not math.isfinite(item):
            # 1e999 is JSON, but Python reads it as an infinity, which JSON cannot carry back
            # (nor PostgreSQL's json columns store)
            raise ValueError("a number is too large to be finite")
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_text(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


def parse_strict(body: bytes | bytearray | str) -> Any:
    try:
        text = body if isinstance(body, str) else str(body, "utf-8")
        value = json.loads(text, parse_constant=_reject_constant)
        check_json(value)
    except UnicodeDecodeError:
        raise ValueError("the body is not UTF-8") from None
    except RecursionError:
        raise ValueError("the body is nested too deeply") from None
    return value


async def _read_limited(request: Request, limit: int) -> bytearray:
    """The body, in one buffer: a large body is never copied whole (json reads a bytearray)."""
    body = await read_within(request, limit)
    if body is None:
        raise _too_large(limit)
    return body


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        VENDOR + "request_too_large",
        "The request body is larger than this server accepts.",
        detail={"max_bytes": limit},
    )


def is_json(content_type: str) -> bool:
    """The content types FastAPI parses as JSON (application/json, application/*+json)."""
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _parse_for_fastapi(request: Request, body: bytearray) -> None:
    """Parse once, strictly, and leave the value where FastAPI looks for it (Request.json).
    The raw bytes are let go first: FastAPI needs only to see that there was a body, and a
    large body would otherwise be held three times over (bytes, text, value) while parsing."""
    try:
        text = str(body, "utf-8")
        request._body = _PARSED
        body.clear()
        request._json = parse_strict(text)
    except UnicodeDecodeError:
        raise ApiError(
            400, "invalid_input", "The request body is not valid JSON: the body is not UTF-8."
        ) from None
    except ValueError as exc:
        raise _not_json(exc) from None


def _not_json(why: ValueError) -> ApiError:
    return ApiError(400, "invalid_input", f"The request body is not valid JSON: {why}.")


def _needs_principal(dependant: Dependant) -> bool:
    pending = [dependant]
    while pending:
        current = pending.pop()
        if current.call is require_principal:
            return True
        pending.extend(current.dependencies)
    return False


def null_means_default(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """A body model's `mode="before"` validator: `null` for the field means "not set", as
    OpenAI's API and its SDK's types have it (`stream=None`), so the field's default."""
    return cls.model_fields[info.field_name or ""].default if value is None else value


def reads_own_body(endpoint: _Endpoint) -> _Endpoint:
    """Mark a route that streams its body itself within a limit of its own (an upload): its
    body is not read here. Every other route's body is, whatever its content type claims."""
    endpoint.reads_own_body = True  # type: ignore[attr-defined]
    return endpoint


async def json_body(request: Request) -> Any:
    """The JSON body of a route that reads it itself: the value parsed here for a JSON
    content type, or the bytes under any other parsed as strictly (Starlette's own
    `request.json()` would take NaN, and fail on deep nesting with a RecursionError)."""
    if hasattr(request, "_json"):
        return request._json
    try:
        return parse_strict(await request.body())
    except ValueError as exc:
        raise _not_json(exc) from None


class StrictJsonRoute(APIRoute):
    """An APIRoute that authenticates before reading a body, and whose JSON bodies are
    size-capped and strictly decoded."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        authenticate_first = _needs_principal(self.dependant)
        read_body = not getattr(self.endpoint, "reads_own_body", False)

        async def strict_handler(request: Request) -> Response:
            if authenticate_first:
                # Raises 401 before a byte of the body is read; the dependency reuses it.
                await require_principal(request)
            content_type = request.headers.get("content-type", "")
            if request.method in ("POST", "PUT", "PATCH") and read_body:
                limit = request.app.state.engine.settings.max_json_body_bytes
                body = await _read_limited(request, limit)
                # FastAPI reads the cached body; it is consumed once. Starlette declares it bytes;
                # a bytearray reads alike and a large body is not copied.
                request._body = body  # type: ignore[assignment]  # a bytearray, not copied
                if body.strip() and is_json(content_type):
                    _parse_for_fastapi(request, body)
            return await handler(request)

        return strict_handler
