"""Bearer authentication (Architecture §5). Every route but discovery depends on this.

Missing and unknown tokens get the same answer shape and timing class, so a caller cannot
tell a wrong token from a revoked one. Which principal a token acts for is the engine's to
say (engine/facade/principals.py); this reads the header and answers a refusal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request

from uhp_server.engine import Principal
from uhp_server.errors import ApiError

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _unauthorized(code: str, message: str) -> ApiError:
    return ApiError(401, code, message, headers=_CHALLENGE)


async def require_principal(request: Request) -> Principal:
    """The caller's principal; remembered on the request, since routes that take a body ask
    for it before reading the body (strict_json) and again as their dependency.

    Async, so it runs on the loop: the configured key costs a comparison, and only a key
    from the database leaves the loop (a reader thread), never a threadpool hop per request."""
    known = getattr(request.state, "principal", None)
    if known is not None:
        return known
    request.state.principal = principal = await _authenticate(request)
    return principal


async def _authenticate(request: Request) -> Principal:
    header = request.headers.get("authorization")
    if not header:
        raise _unauthorized("missing_credential", "This request needs a bearer token.")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("invalid_credential", "The credential is not valid.")
    principal = await request.app.state.engine.principals.for_token(token)
    if principal is None:
        raise _unauthorized("invalid_credential", "The credential is not valid.")
    return principal


def still_authenticated(request: Request, principal: Principal) -> Callable[[], Awaitable[bool]]:
    """For a stream the request opened: whether its bearer token still acts for `principal`
    (a revoked key no longer does), asked again while the stream is open."""

    async def check() -> bool:
        try:
            return (await _authenticate(request)).id == principal.id
        except ApiError:
            return False

    return check


CurrentPrincipal = Annotated[Principal, Depends(require_principal)]
