"""Bearer authentication (Architecture §5). Every route but discovery depends on this.

Missing and unknown tokens get the same answer shape and timing class, so a caller cannot
tell a wrong token from a revoked one.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request

from storage import keys
from storage.models import Principal
from uhp_server.errors import ApiError

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _unauthorized(code: str, message: str) -> ApiError:
    return ApiError(401, code, message, headers=_CHALLENGE)


async def _default_principal(request: Request) -> Principal:
    """The principal UHP_API_KEY belongs to: it never changes, so it is looked up once."""
    state = request.app.state
    if getattr(state, "default_principal", None) is None:
        db = state.ctx.db
        state.default_principal = await db.write(keys.ensure_principal, db, keys.DEFAULT_PRINCIPAL)
    return state.default_principal


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
    ctx = request.app.state.ctx
    header = request.headers.get("authorization")
    if not header:
        raise _unauthorized("missing_credential", "This request needs a bearer token.")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("invalid_credential", "The credential is not valid.")
    configured = ctx.settings.api_key
    if configured and hmac.compare_digest(token.encode(), configured.encode()):
        return await _default_principal(request)
    principal = await ctx.db.read(keys.principal_for_key, ctx.db, token)
    if principal is None:
        raise _unauthorized("invalid_credential", "The credential is not valid.")
    return principal


CurrentPrincipal = Annotated[Principal, Depends(require_principal)]
