"""Front-door session keys: a contract's own session id -> the UHP session it continues."""

from __future__ import annotations

import time

from sqlmodel import Session, col, delete

from storage.db import Database
from storage.models import DoorSessionRow


def find(
    db: Database, principal_id: str, harness_id: str, door: str, external_id: str
) -> str | None:
    """The UHP session mapped to this key, if any."""
    with db.session() as s:
        row = s.get(DoorSessionRow, (principal_id, harness_id, door, external_id))
        return row.session_id if row is not None else None


def bind(
    db: Database, principal_id: str, harness_id: str, door: str, external_id: str, session_id: str
) -> None:
    """Map the key to the session (on the writer thread, after `find` found none)."""
    with db.session() as s:
        add_binding(s, principal_id, harness_id, door, external_id, session_id)
        s.commit()


def add_binding(
    s: Session, principal_id: str, harness_id: str, door: str, external_id: str, session_id: str
) -> None:
    """`bind` inside the caller's transaction."""
    s.merge(_binding(principal_id, harness_id, door, external_id, session_id))


def _binding(
    principal_id: str, harness_id: str, door: str, external_id: str, session_id: str
) -> DoorSessionRow:
    return DoorSessionRow(
        principal_id=principal_id,
        harness_id=harness_id,
        door=door,
        external_id=external_id,
        session_id=session_id,
        created_at=int(time.time()),
    )


def rekey(
    db: Database, principal_id: str, harness_id: str, door: str, external_id: str, session_id: str
) -> None:
    """Make this key the door's only one for the session (on the writer thread), in one
    transaction. A key another session holds already names two conversations that cannot be
    told apart (the same history, word for word): it is dropped, and continues neither."""
    with db.session() as s:
        held = s.get(DoorSessionRow, (principal_id, harness_id, door, external_id))
        s.exec(
            delete(DoorSessionRow).where(
                col(DoorSessionRow.door) == door, col(DoorSessionRow.session_id) == session_id
            )
        )
        if held is not None and held.session_id != session_id:
            s.delete(held)
        else:
            add_binding(s, principal_id, harness_id, door, external_id, session_id)
        s.commit()
