"""Front-door session keys: a contract's own session id -> the UHP session it continues."""

from __future__ import annotations

import time
from dataclasses import dataclass

from storage.tables import DoorSessionRow
from storage.unit import Tx


@dataclass(frozen=True)
class DoorBinding:
    """A door's key for a new session: bound to nothing yet, or moved from `replacing`."""

    principal_id: str
    harness_id: str
    door: str
    external_id: str
    replacing: str | None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.principal_id, self.harness_id, self.door, self.external_id)


# Binding a key to a new session, conditionally, so that the database decides which of two
# racing requests wins: its row comes back when it went through (storage/acceptance.py sends
# them inside a larger statement).
BIND_NEW = (
    "INSERT INTO door_session (principal_id, harness_id, door, external_id, session_id,"
    " created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1"
)
MOVE = (
    "UPDATE door_session SET session_id = ?, created_at = ? WHERE principal_id = ?"
    " AND harness_id = ? AND door = ? AND external_id = ? AND session_id = ?"
    " RETURNING 1"
)

# rekey's statements: plain SQL, so that each reads what the database holds now (another
# replica's key included), not what this transaction's ORM session remembers.
DROP_SESSION_KEYS = "DELETE FROM door_session WHERE door = ? AND session_id = ?"
_KEY = "principal_id = ? AND harness_id = ? AND door = ? AND external_id = ?"
HELD = f"SELECT session_id FROM door_session WHERE {_KEY}"
DROP_KEY = f"DELETE FROM door_session WHERE {_KEY}"


def binding_statement(binding: DoorBinding, session_id: str) -> tuple[str, tuple[object, ...]]:
    """BIND_NEW, or MOVE off `binding.replacing`, with its parameters."""
    now = int(time.time())
    if binding.replacing is not None:
        return MOVE, (session_id, now, *binding.key, binding.replacing)
    return BIND_NEW, (*binding.key, session_id, now)


def bind_to_new(tx: Tx, binding: DoorBinding, session_id: str) -> bool:
    """Bind the key to a new session (or move it there off `binding.replacing`); False when
    another request bound (or moved) it first."""
    return bool(tx.rows(*binding_statement(binding, session_id)))


def find(tx: Tx, principal_id: str, harness_id: str, door: str, external_id: str) -> str | None:
    """The UHP session mapped to this key, if any."""
    row = tx.orm.get(DoorSessionRow, (principal_id, harness_id, door, external_id))
    return row.session_id if row is not None else None


def bind(
    tx: Tx, principal_id: str, harness_id: str, door: str, external_id: str, session_id: str
) -> None:
    """Map the key to the session (after `find` found none)."""
    tx.orm.merge(_binding(principal_id, harness_id, door, external_id, session_id))


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
    tx: Tx, principal_id: str, harness_id: str, door: str, external_id: str, session_id: str
) -> None:
    """Make this key the door's only one for the session. A key another session holds
    already names two conversations that cannot be told apart (the same history, word for
    word): it is dropped, and continues neither.

    The key is inserted conditionally, so that two replicas rekeying it for two sessions at
    once cannot both insert it (the second would fail on the primary key): the second finds
    it held by the other session and drops it, as if the two had come one after the other."""
    tx.execute(DROP_SESSION_KEYS, (door, session_id))
    key = (principal_id, harness_id, door, external_id)
    if tx.rows(BIND_NEW, (*key, session_id, int(time.time()))):
        return
    held = tx.rows(HELD, key)
    if held and held[0][0] != session_id:
        tx.execute(DROP_KEY, key)
