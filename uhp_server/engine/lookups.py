"""What the doors look up besides tasks: the principal's harnesses, a session's latest turn,
a turn's files, a principal by name, a door's session key.

A mixin of TaskService (engine/tasks.py), beside TaskSteering: doors read these through the
engine and never touch storage. Lookups that may create a principal's default harnesses are
writes (one unit of work: the defaults and the look-up); the others are reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from storage import artifacts as artifact_store
from storage import door_sessions, keys
from storage import harnesses as harness_store
from storage import responses as response_store
from storage import sessions as session_store
from storage.tables import HarnessRow
from storage.unit import Tx
from uhp_server.engine.requests import SessionKey
from uhp_server.engine.turn_files import download_url
from uhp_server.errors import ApiError
from uhp_server.harnesses.defaults import default_harness, ensure_defaults, made_default

if TYPE_CHECKING:
    from harness_bases.base import HarnessBase
    from storage.db import Database


@dataclass(frozen=True)
class HarnessInfo:
    """A harness as a door shows or picks it."""

    id: str
    name: str
    base: str
    created_at_ms: int
    default_model: str | None  # the harness's own `defaultModel`, if it sets one


@dataclass(frozen=True)
class TurnFile:
    """A file a turn produced, with the link it is downloaded from."""

    filename: str
    size: int
    download_url: str


def _info(row: HarnessRow) -> HarnessInfo:
    default = row.config.get("defaultModel")
    return HarnessInfo(
        row.id, row.name, row.base, row.created_at_ms, default if isinstance(default, str) else None
    )


class TaskLookups:
    db: Database
    bases: dict[str, HarnessBase]

    async def harnesses(
        self, principal_id: str, *, create_defaults: bool = True
    ) -> list[HarnessInfo]:
        """The principal's harnesses, its default ones created on first use (a job on the
        writer thread; `create_defaults=False` only reads)."""

        def look(tx: Tx) -> list[HarnessInfo]:
            if create_defaults:
                ensure_defaults(tx, principal_id, self.bases)
            return [_info(row) for row in harness_store.list_harnesses(tx, principal_id)]

        return await (self.db.write(look) if create_defaults else self.db.read(look))

    async def harness(self, principal_id: str, harness_id: str | None) -> HarnessInfo | None:
        """The principal's harness with this id, or its default harness for None."""

        def look(tx: Tx, create_defaults: bool) -> HarnessInfo | None:
            if harness_id is not None:
                row = harness_store.get_harness(tx, principal_id, harness_id)
            elif create_defaults:
                row = default_harness(tx, principal_id, self.bases)
            else:
                row = made_default(tx, principal_id, self.bases)
            return _info(row) if row is not None else None

        # A read finds the harness nearly always; only a principal's first task waits on the
        # writer, to create its defaults.
        found = await self.db.read(look, False)
        if found is None and harness_id is None:
            found = await self.db.write(look, True)
        return found

    async def latest_in_uhp_session(self, principal_id: str, session_id: str) -> str | None:
        """The latest response of the principal's UHP session (None: it has none yet);
        404 session_not_found when there is no such session."""

        def look(tx: Tx) -> str | None:
            if session_store.get_session(tx, principal_id, session_id) is None:
                raise ApiError(404, "session_not_found", "No session with that id.")
            return response_store.latest_in_session(tx, session_id)

        return await self.db.read(look)

    async def successors(
        self, principal_id: str, response_id: str
    ) -> list[tuple[str, dict[str, Any]]]:
        """The responses that follow this one in its session, oldest first, each with the
        metadata it was created with: for a parked one, the new turn that carried it on (on
        whichever replica took the answer), and maybe later tasks of the session."""
        return await self.db.read(response_store.successors, principal_id, response_id)

    async def turn_files(self, response_id: str, base_url: str) -> list[TurnFile]:
        """The artifacts the response's turn produced, linked on `base_url`."""

        def look(tx: Tx) -> list[TurnFile]:
            rows = artifact_store.for_response(tx, response_id)
            return [TurnFile(r.filename, r.bytes, download_url(base_url, r)) for r in rows]

        return await self.db.read(look)

    async def principal_named(self, name: str) -> str:
        """The id of the principal with this name, created on first use."""
        return (await self.db.write(keys.ensure_principal, name)).id

    async def rekey_door_session(
        self, principal_id: str, harness_id: str, key: SessionKey, session_id: str
    ) -> None:
        """Make `key` the one key of its door that maps to the session: only the newest key
        continues it (a door whose key changes every turn)."""
        await self.db.write(
            door_sessions.rekey,
            principal_id,
            harness_id,
            key.door,
            key.external_id,
            session_id,
        )
