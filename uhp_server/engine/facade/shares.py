"""Session sharing for every door (Sessions §5): publish, read back and revoke a session's
share, and what its token opens — the session, its turns and its artifacts, nothing else.

The token is a capability for the shared view only; it is never an API credential, and
revoking deletes it, so every link ever minted for the session stops resolving at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage import artifacts as artifact_store
from storage import sessions as session_store
from storage import shares
from storage.db import Database
from storage.tables import SessionRow, ShareRow
from storage.unit import Tx
from uhp_server.engine.facade import records, rows
from uhp_server.engine.facade.files import Download, Files
from uhp_server.engine.facade.sessions import Sessions, turns_of
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.errors import VENDOR, ApiError


def share_not_found() -> ApiError:
    return ApiError(404, VENDOR + "share_not_found", "This session is not shared.")


@dataclass(frozen=True)
class SharedSession:
    """What a share's token opens: the session and its history."""

    share: records.Share
    session: records.Session
    turns: list[records.Turn]


class Shares:
    def __init__(self, db: Database, runs: RunRegistry, sessions: Sessions, files: Files) -> None:
        self.db = db
        self.runs = runs
        self.sessions = sessions
        self.files = files

    async def publish(self, principal_id: str, session_id: str) -> records.Share:
        """The session's share, minted on first use (publishing twice gives the same link)."""
        session = await self.sessions.get(principal_id, session_id)
        return rows.share(await self.db.write(shares.publish, principal_id, session.id))

    async def current(self, principal_id: str, session_id: str) -> records.Share:
        """The session's share (404 share_not_found when it is not shared)."""
        session = await self.sessions.get(principal_id, session_id)
        found = await self.db.read(shares.current, principal_id, session.id)
        if found is None:
            raise share_not_found()
        return rows.share(found)

    async def revoke(self, principal_id: str, session_id: str) -> records.Share:
        """Revoke every link of the session's share; the share as it was (404 when none)."""
        session = await self.sessions.get(principal_id, session_id)

        def revoke(tx: Tx) -> ShareRow:
            existing = shares.current(tx, principal_id, session.id)
            if existing is None:
                raise share_not_found()
            shares.revoke(tx, session.id)
            return existing

        return rows.share(await self.db.write(revoke))

    # -- what a token opens ------------------------------------------------------------------
    async def shared(self, token: str) -> SharedSession | None:
        """The session a token opens, with its history; None for a token that opens nothing
        (never issued, revoked, or its session deleted)."""

        def look(tx: Tx) -> SharedSession | None:
            found = self._shared(tx, token)
            if found is None:
                return None
            share, session = found
            turns = turns_of(tx, self.runs, session.id)
            return SharedSession(rows.share(share), rows.session(session), turns)

        return await self.db.read(look)

    async def shared_file(self, token: str, file_id: str) -> Download | None:
        """An artifact of the shared session, by its id; None when the token or the file
        opens nothing."""

        def look(tx: Tx) -> records.Artifact | None:
            found = self._shared(tx, token)
            if found is None:
                return None
            share, session = found
            row = artifact_store.get_artifact(tx, share.principal_id, session.container_id, file_id)
            return rows.artifact(row) if row is not None else None

        artifact = await self.db.read(look)
        if artifact is None:
            return None
        return Download(artifact, self.files.content(artifact))

    @staticmethod
    def _shared(tx: Tx, token: str) -> tuple[ShareRow, SessionRow] | None:
        share = shares.by_token(tx, token)
        if share is None:
            return None
        session = session_store.get_session(tx, share.principal_id, share.session_id)
        return (share, session) if session is not None else None
