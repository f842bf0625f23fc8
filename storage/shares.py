"""Session shares: a random token that opens a read-only page of one session.

The token is a capability for the share page only; it is never an API credential. Revoking
deletes every share row of the session, so every link ever minted for it stops resolving.
"""

from __future__ import annotations

import secrets
import time

from sqlmodel import col, delete, select

from storage.tables import ShareRow
from storage.unit import Tx


def current(tx: Tx, principal_id: str, session_id: str) -> ShareRow | None:
    return tx.orm.exec(
        select(ShareRow).where(
            ShareRow.session_id == session_id, ShareRow.principal_id == principal_id
        )
    ).first()


def publish(tx: Tx, principal_id: str, session_id: str) -> ShareRow:
    """The session's share, minted on first use (publishing twice returns the same link)."""
    existing = current(tx, principal_id, session_id)
    if existing is not None:
        return existing
    row = ShareRow(
        id="shr_" + secrets.token_hex(16),
        principal_id=principal_id,
        session_id=session_id,
        token=secrets.token_urlsafe(32),  # 256 bits
        created_at=int(time.time()),
    )
    tx.orm.add(row)
    return row


def revoke(tx: Tx, session_id: str) -> None:
    tx.orm.exec(delete(ShareRow).where(col(ShareRow.session_id) == session_id))


def by_token(tx: Tx, token: str) -> ShareRow | None:
    if not token or len(token) > 128:
        return None
    return tx.orm.exec(select(ShareRow).where(ShareRow.token == token)).first()


def to_wire(row: ShareRow, *, enabled: bool = True) -> dict[str, object]:
    """The protocol's SessionShare: a base-relative url survives any proxy in front."""
    return {
        "id": row.id,
        "object": "session.share",
        "url": f"/s/{row.token}",
        "enabled": enabled,
        "session_id": row.session_id,
        "created_at": row.created_at,
    }
