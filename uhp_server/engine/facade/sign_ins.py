"""Sign-ins for every door that serves a browser: an API key exchanged for a server-side
session, so the key never stays in the browser.

A sign-in acts for the key's principal and nothing more: whatever a door does for it goes
through the same calls as a bearer request. It ends when it expires, on sign-out, and when
the key it came from is revoked (storage/sign_ins.py checks the key on every lookup).
"""

from __future__ import annotations

import secrets
import time

from storage import sign_ins
from storage.db import Database
from storage.keys import hash_key
from storage.tables import SignInRow
from uhp_server.engine.facade import records, rows
from uhp_server.engine.facade.principals import Principals


class SignIns:
    def __init__(self, db: Database, principals: Principals, lifetime_seconds: float) -> None:
        self.db = db
        self.principals = principals
        self.lifetime_seconds = lifetime_seconds

    async def open(self, key: str) -> records.SignIn | None:
        """A new sign-in for the key's principal; None for a key no principal has (the same
        answer for a wrong key and a revoked one)."""
        principal = await self.principals.for_token(key)
        if principal is None:
            return None
        token, csrf_token, now = secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.time()
        row = SignInRow(
            id=sign_ins.token_hash(token),
            principal_id=principal.id,
            key_hash=hash_key(key),
            csrf_token=csrf_token,
            created_at=now,
            expires_at=now + self.lifetime_seconds,
        )
        await self.db.write(sign_ins.open_sign_in, row)
        return records.SignIn(token, csrf_token, principal, row.expires_at)

    async def live(self, token: str) -> records.SignIn | None:
        """The sign-in a browser's token opens, while it is live; None otherwise."""
        configured = self.principals.configured_key
        found = await self.db.read(
            sign_ins.live, token, time.time(), hash_key(configured) if configured else None
        )
        if found is None:
            return None
        row, principal = found
        return records.SignIn("", row.csrf_token, rows.principal(principal), row.expires_at)

    async def close(self, token: str) -> None:
        """Sign out: the token opens nothing from now on (nothing to do for one that didn't)."""
        await self.db.write(sign_ins.close, token)
