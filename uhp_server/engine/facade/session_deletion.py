"""Deleting a session's trace (Sessions §6, Security §6).

In this order: the session stops being addressable (no new task can continue it) and its
share stops resolving; the running turn is cancelled and its process waited for, so nothing
writes into storage that no longer has an owner; then every response, event, artifact and
inline input is deleted, the bytes no other object references are removed, and the session's
workspace and agent home are removed from disk.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from storage import agent_memories, session_listing, shares, traces
from storage import artifacts as artifact_store
from storage import files as file_store
from storage import responses as response_store
from storage import sessions as session_store
from storage.blobs import BlobStore
from storage.db import Database
from storage.unit import Tx
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.files.trees import remove_tree


class SessionDeleter:
    def __init__(
        self,
        db: Database,
        runs: RunRegistry,
        blobs: BlobStore,
        sessions_dir: Path,
        previews_dir: Path,
        grace_seconds: float,
    ) -> None:
        self.db = db
        self.runs = runs
        self.blobs = blobs
        self.sessions_dir = sessions_dir
        self.previews_dir = previews_dir
        self.grace_seconds = grace_seconds

    async def delete(self, session_id: str) -> None:
        await self.db.write(self._unaddressable, session_id)
        run = self.runs.for_session(session_id)
        if run is not None and not run.log.finished:
            await self.runs.cancel(run)
        elif run is None and self.runs.peers.shared:  # it may run on another replica
            active = await self.db.read(session_store.active_response, session_id)
            if active is not None:
                await self.runs.peers.relay_cancel(active)
        await self.runs.wait_stopped(session_id, self.grace_seconds + 10)
        await self.runs.end_warm(session_id)  # kept warm by its last turn: gone before its files
        response_ids = await self.db.read(session_listing.all_response_ids, session_id)
        for response_id in response_ids:  # a late append of theirs is stored no more
            run = self.runs.get(response_id)
            if run is not None:
                run.log.persist = False
        unused = await self.db.write(self._delete_rows, session_id, response_ids)
        for response_id in response_ids:
            self.runs.forget(response_id)
        await asyncio.to_thread(self._delete_files, session_id, unused)

    @staticmethod
    def _unaddressable(tx: Tx, session_id: str) -> None:
        traces.forget_session(tx, session_id)
        shares.revoke(tx, session_id)

    @staticmethod
    def _delete_rows(tx: Tx, session_id: str, response_ids: list[str]) -> list[str]:
        """Delete the trace's rows, in one transaction; the blobs nothing else references
        now."""
        inputs = traces.inline_inputs(tx, session_id)
        for response_id in response_ids:
            response_store.delete_response(tx, response_id)
        traces.delete_files(tx, [row.id for row in inputs])
        hashes = artifact_store.delete_for_session(tx, session_id)
        # Its primer holds what its memories said: it goes with the session.
        agent_memories.delete_session_memory(tx, [session_id])
        candidates = sorted({*hashes, *(row.sha256 for row in inputs)})
        return [sha256 for sha256 in candidates if not file_store.blob_in_use(tx, sha256)]

    def _delete_files(self, session_id: str, unused: list[str]) -> None:
        for sha256 in unused:
            self.blobs.delete(sha256)
            for preview in self.previews_dir.glob(f"{sha256}*.pdf"):  # one a document type
                preview.unlink(missing_ok=True)
        remove_tree(self.sessions_dir / session_id)  # however deep the agent nested it
