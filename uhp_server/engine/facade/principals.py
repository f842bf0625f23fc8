"""Principals for every door: who a bearer token acts for, and a principal by name.

A flood of wrong keys must not cost a database lookup each (it starved the reader threads
that good keys need): a token without the prefix every issued key has is refused at once, and
a well-formed unknown one is remembered as unknown for a while. Only refusals are remembered,
never acceptances, so revoking a key still takes effect on the next request.
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict

from storage import keys
from storage.db import Database
from uhp_server.engine.facade import records, rows


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


class Principals:
    def __init__(self, db: Database, configured_key: str | None) -> None:
        self.db = db
        self.configured_key = configured_key  # UHP_API_KEY: the default principal's
        self.unknown = UnknownKeys()
        self._default: records.Principal | None = None

    async def for_token(self, token: str) -> records.Principal | None:
        """The principal a bearer token acts for; None for a token no principal has.

        The configured key costs a comparison and an unknown-looking one nothing; only a key
        that may be issued leaves the event loop (a reader thread)."""
        configured = self.configured_key
        if configured and hmac.compare_digest(token.encode(), configured.encode()):
            return await self.default()
        if not token.startswith(keys.KEY_PREFIX) or token in self.unknown:
            return None
        found = await self.db.read(keys.principal_for_key, token)
        if found is None:
            self.unknown.add(token)
            return None
        return rows.principal(found)

    async def default(self) -> records.Principal:
        """The principal UHP_API_KEY belongs to: it never changes, so it is looked up once."""
        if self._default is None:
            found = await self.db.write(keys.ensure_principal, keys.DEFAULT_PRINCIPAL)
            self._default = rows.principal(found)
        return self._default

    # -- a principal's own keys ----------------------------------------------------------
    async def keys_of(self, principal_id: str) -> list[records.ApiKeyInfo]:
        """The principal's keys, revoked ones included, newest first (never the keys)."""
        found = await self.db.read(keys.keys_of, principal_id)
        return [records.ApiKeyInfo(k.id, k.created_at, k.revoked_at) for k in found]

    async def create_key(self, principal_id: str) -> tuple[str, str]:
        """A new key of the principal: (its id, the key itself, to be shown once)."""
        return await self.db.write(keys.create_key_for, principal_id)

    async def revoke_key(self, principal_id: str, key_id: str) -> bool:
        """Revoke one of the principal's own keys (False: no such key of its, or revoked
        already). Effective for the next request, sign-ins made from it included."""
        return await self.db.write(keys.revoke_key_of, principal_id, key_id)

    async def named(self, name: str) -> str:
        """The id of the principal with this name, created on first use."""
        return (await self.db.write(keys.ensure_principal, name)).id
