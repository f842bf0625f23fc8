"""Principals and their API keys. Keys are stored as SHA-256 hashes and shown only once."""

from __future__ import annotations

import hashlib
import secrets
import time

from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from storage.db import Database
from storage.models import ApiKey, Principal

DEFAULT_PRINCIPAL = "default"
KEY_PREFIX = "uhp_sk_"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def ensure_principal(db: Database, name: str) -> Principal:
    """The principal named `name`, created on first use. Safe when concurrent first requests
    race to create it: the unique name decides, and the losers read the winner's row."""
    with db.session() as s:
        found = s.exec(select(Principal).where(Principal.name == name)).first()
        if found:
            return found
        principal = Principal(id="prin_" + secrets.token_hex(16), name=name, created_at=time.time())
        s.add(principal)
        try:
            s.commit()
        except IntegrityError:
            s.rollback()
            return s.exec(select(Principal).where(Principal.name == name)).one()
        return principal


def create_key(db: Database, principal_name: str) -> tuple[str, str]:
    """Make a new key for the principal; returns (key id, the key itself)."""
    principal = ensure_principal(db, principal_name)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(
        id="key_" + secrets.token_hex(8),
        principal_id=principal.id,
        key_hash=hash_key(key),
        created_at=time.time(),
    )
    with db.session() as s:
        s.add(row)
        s.commit()
    return row.id, key


def revoke_key(db: Database, key_or_id: str) -> bool:
    """Revoke by key id or by the key itself. Effective for the next request."""
    with db.session() as s:
        row = (
            s.get(ApiKey, key_or_id)
            or s.exec(select(ApiKey).where(ApiKey.key_hash == hash_key(key_or_id))).first()
        )
        if row is None or row.revoked_at is not None:
            return False
        row.revoked_at = time.time()
        s.add(row)
        s.commit()
        return True


def principal_for_key(db: Database, key: str) -> Principal | None:
    """The principal of an active key; read on every request so revocation is immediate."""
    with db.session() as s:
        return s.exec(
            select(Principal)
            .join(ApiKey, ApiKey.principal_id == Principal.id)  # type: ignore[arg-type]
            .where(ApiKey.key_hash == hash_key(key), ApiKey.revoked_at.is_(None))  # type: ignore[union-attr]
        ).first()


def any_key_exists(db: Database) -> bool:
    with db.session() as s:
        return s.exec(select(ApiKey).where(ApiKey.revoked_at.is_(None))).first() is not None  # type: ignore[union-attr]


def list_keys(db: Database) -> list[tuple[ApiKey, str]]:
    with db.session() as s:
        rows = s.exec(select(ApiKey, Principal).where(ApiKey.principal_id == Principal.id)).all()
        return [(key, principal.name) for key, principal in rows]
