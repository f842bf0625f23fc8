"""Sign-ins: a browser's session made from an API key (the owner's console).

The browser holds a random token; only its hash is stored, so reading the database signs no
one in. A sign-in is live while it has not expired and the key it came from is still
active: revoking a key ends its sign-ins on their next request, as it ends the key's own.
"""

from __future__ import annotations

from sqlmodel import col, delete, exists, or_, select

from storage.keys import hash_key
from storage.tables import ApiKey, Principal, SignInRow
from storage.unit import Tx


def token_hash(token: str) -> str:
    return hash_key(token)


def open_sign_in(tx: Tx, row: SignInRow) -> None:
    """Store a new sign-in, and forget every one that has expired (it could never be used
    again, and sign-ins are rare enough that this keeps the table small)."""
    tx.orm.exec(delete(SignInRow).where(col(SignInRow.expires_at) <= row.created_at))
    tx.orm.add(row)


def live(
    tx: Tx, token: str, now: float, configured_key_hash: str | None
) -> tuple[SignInRow, Principal] | None:
    """The sign-in this browser token opens, with its principal, while it is live: not
    expired, and its key still active (an issued key not revoked, or the configured key)."""
    if not token or len(token) > 128:
        return None
    active_key = exists().where(
        col(ApiKey.key_hash) == col(SignInRow.key_hash), col(ApiKey.revoked_at).is_(None)
    )
    key_live = (
        or_(active_key, col(SignInRow.key_hash) == configured_key_hash)
        if configured_key_hash
        else active_key
    )
    found = tx.orm.exec(
        select(SignInRow, Principal)
        .join(Principal, col(Principal.id) == col(SignInRow.principal_id))
        .where(SignInRow.id == token_hash(token), col(SignInRow.expires_at) > now, key_live)
    ).first()
    return None if found is None else (found[0], found[1])


def close(tx: Tx, token: str) -> None:
    tx.orm.exec(delete(SignInRow).where(col(SignInRow.id) == token_hash(token)))
