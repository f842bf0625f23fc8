"""Bearer authentication (Architecture §5). Every route but discovery depends on this.

Missing and unknown tokens get the same answer shape and timing class, so a caller cannot
tell a wrong token from a revoked one.

A flood of wrong keys must not cost a database lookup each (it starved the reader threads
that good keys need): a token without the prefix every issued key has is refused on the loop,
and a well-formed unknown one is remembered as unknown for a while. Only refusals are
remembered, never acceptances, so revoking a key still takes effect on the next request.
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict
from typing import Annotated

from fastapi import Depends, Request

from storage import keys
from storage.tables import Principal
from uhp_server.errors import ApiError

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


class UnknownKeys:
    """Hashes of well-formed tokens the database did not know, each for `ttl` seconds, the
    least recently refused forgotten first past `size`. A key issued later cannot be among
    them: issued keys are random, so a remembered token was a guess."""

    def __init__(self, size: int = 4096, ttl: float = 300.0) -> None:
        self.size = size
        self.ttl = ttl
        self._until: OrderedDict[str, float] = OrderedDict()

    def __contains__(self, token: str) -> bool:
        digest = keys.hash_key(token)
        until = self._until.get(digest)
        if until is None:
            return False
        if until < time.monotonic():
            del self._until[digest]
            return False
        self._until.move_to_end(digest)
        return True

    def add(self, token: str) -> None:
        digest = keys.hash_key(token)
        self._until[digest] = time.monotonic() + self.ttl
        self._until.move_to_end(digest)
        while len(self._until) > self.size:
            self._until.popitem(last=False)


def _unauthorized(code: str, message: str) -> ApiError:
    return ApiError(401, code, message, headers=_CHALLENGE)


async def _default_principal(request: Request) -> Principal:
    """The principal UHP_API_KEY belongs to: it never changes, so it is looked up once."""
    state = request.app.state
    if getattr(state, "default_principal", None) is None:
        db = state.ctx.db
        state.default_principal = await db.write(keys.ensure_principal, keys.DEFAULT_PRINCIPAL)
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
    unknown = _unknown_keys(request)
    if not token.startswith(keys.KEY_PREFIX) or token in unknown:
        raise _unauthorized("invalid_credential", "The credential is not valid.")
    principal = await ctx.db.read(keys.principal_for_key, token)
    if principal is None:
        unknown.add(token)
        raise _unauthorized("invalid_credential", "The credential is not valid.")
    return principal


def _unknown_keys(request: Request) -> UnknownKeys:
    state = request.app.state
    if getattr(state, "unknown_keys", None) is None:
        state.unknown_keys = UnknownKeys()
    return state.unknown_keys


CurrentPrincipal = Annotated[Principal, Depends(require_principal)]
