"""Principals and their API keys. Keys are stored as SHA-256 hashes and shown only once."""

from __future__ import annotations

import hashlib
import secrets
import time

from sqlmodel import col, func, select

from storage.tables import ApiKey, Principal
from storage.unit import Tx

DEFAULT_PRINCIPAL = "default"
KEY_PREFIX = "uhp_sk_"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def ensure_principal(tx: Tx, name: str) -> Principal:
    """The principal named `name`, created on first use. Safe when concurrent first requests
    race to create it: the unique name decides (the losers' inserts do nothing, waiting for
    the winner's commit on PostgreSQL), and every one reads the winner's row."""
    found = _principal_named(tx, name)
    if found is not None:
        return found
    tx.execute(
        "INSERT INTO principal (id, name, created_at) VALUES (?, ?, ?)"
        " ON CONFLICT (name) DO NOTHING",
        ("prin_" + secrets.token_hex(16), name, time.time()),
    )
    created = _principal_named(tx, name)
    assert created is not None, "inserted, or inserted by the request that won"
    return created


def given_agent_number(tx: Tx, principal_id: str) -> int | None:
    """The principal's agent number if it has been given (a read: every turn asks)."""
    row = tx.orm.get(Principal, principal_id)
    return None if row is None else row.agent_number


def agent_number(tx: Tx, principal_id: str) -> int:
    """The principal's agent number (0, 1, ...): given on first use, the next one free, and
    kept, so that its agents keep their uid (uhp_server/sandbox/agent_user.py). Two principals
    racing for the same number: the unique index refuses one, which its caller retries."""
    row = tx.orm.get(Principal, principal_id)
    if row is None:
        raise LookupError(f"no principal {principal_id}")
    if row.agent_number is None:
        taken = tx.orm.exec(select(func.max(Principal.agent_number))).one()
        row.agent_number = 0 if taken is None else taken + 1
        tx.orm.add(row)
        tx.orm.flush()
    return row.agent_number


def _principal_named(tx: Tx, name: str) -> Principal | None:
    return tx.orm.exec(select(Principal).where(Principal.name == name)).first()


def create_key(tx: Tx, principal_name: str) -> tuple[str, str]:
    """Make a new key for the principal; returns (key id, the key itself)."""
    return create_key_for(tx, ensure_principal(tx, principal_name).id)


def create_key_for(tx: Tx, principal_id: str) -> tuple[str, str]:
    """Make a new key for the principal with this id; returns (key id, the key itself)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(
        id="key_" + secrets.token_hex(8),
        principal_id=principal_id,
        key_hash=hash_key(key),
        created_at=time.time(),
    )
    tx.orm.add(row)
    return row.id, key


def keys_of(tx: Tx, principal_id: str) -> list[ApiKey]:
    """The principal's keys, revoked ones included, newest first."""
    query = select(ApiKey).where(ApiKey.principal_id == principal_id)
    return list(tx.orm.exec(query.order_by(col(ApiKey.created_at).desc(), col(ApiKey.id))))


def revoke_key_of(tx: Tx, principal_id: str, key_id: str) -> bool:
    """Revoke one of the principal's own keys by its id; False when it has no such key
    (another principal's is not its own) or the key was revoked already."""
    row = tx.orm.get(ApiKey, key_id)
    if row is None or row.principal_id != principal_id or row.revoked_at is not None:
        return False
    row.revoked_at = time.time()
    tx.orm.add(row)
    return True


def revoke_key(tx: Tx, key_or_id: str) -> bool:
    """Revoke by key id or by the key itself. Effective for the next request."""
    s = tx.orm
    row = (
        s.get(ApiKey, key_or_id)
        or s.exec(select(ApiKey).where(ApiKey.key_hash == hash_key(key_or_id))).first()
    )
    if row is None or row.revoked_at is not None:
        return False
    row.revoked_at = time.time()
    s.add(row)
    return True


def principal_for_key(tx: Tx, key: str) -> Principal | None:
    """The principal of an active key; read on every request so revocation is immediate."""
    return tx.orm.exec(
        select(Principal)
        .join(ApiKey, col(ApiKey.principal_id) == col(Principal.id))
        .where(ApiKey.key_hash == hash_key(key), col(ApiKey.revoked_at).is_(None))
    ).first()


def any_key_exists(tx: Tx) -> bool:
    return tx.orm.exec(select(ApiKey).where(col(ApiKey.revoked_at).is_(None))).first() is not None


def list_keys(tx: Tx) -> list[tuple[ApiKey, str]]:
    rows = tx.orm.exec(select(ApiKey, Principal).where(ApiKey.principal_id == Principal.id)).all()
    return [(key, principal.name) for key, principal in rows]
