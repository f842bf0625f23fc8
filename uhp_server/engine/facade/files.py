"""Files for every door (Files chapter): uploads kept, a session's artifacts listed, zipped,
read and previewed.

Every artifact is looked up in the database by (container id, file id) and the caller's
principal; a path is only ever built from the content hash stored with it. No client-supplied
id ever reaches the filesystem, so there is nothing to traverse.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from storage import artifacts as artifact_store
from storage import files as file_store
from storage import sessions as session_store
from storage.blobs import BlobStore, BlobWriter
from storage.db import Database
from storage.tables import FileRow
from storage.unit import Tx
from uhp_server.engine.facade import records, rows
from uhp_server.engine.facade.sessions import Sessions
from uhp_server.errors import ApiError
from uhp_server.files.archive import zip_stream
from uhp_server.files.previews import PreviewRenderer
from uhp_server.ids import new_id


def file_not_found(message: str = "No file with that id in that container.") -> ApiError:
    return ApiError(404, "file_not_found", message)


@dataclass(frozen=True)
class Download:
    """An artifact and its bytes, a chunk at a time."""

    artifact: records.Artifact
    chunks: Iterator[bytes]


class Files:
    def __init__(
        self,
        db: Database,
        blobs: BlobStore,
        previews: PreviewRenderer,
        sessions: Sessions,
        max_file_bytes: int,
    ) -> None:
        self.db = db
        self.blobs = blobs
        self.previews = previews
        self.sessions = sessions
        self.max_file_bytes = max_file_bytes  # UHP_MAX_FILE_BYTES: an upload's limit

    # -- in ------------------------------------------------------------------------------
    def new_upload(self) -> BlobWriter:
        """Where a door writes an upload's bytes as they arrive (`keep_upload` keeps them)."""
        return self.blobs.writer()

    async def keep_upload(
        self,
        principal_id: str,
        sink: records.UploadSink,
        filename: str,
        media_type: str,
        purpose: str,
    ) -> records.UploadedFile:
        """Keep a received upload as the principal's file, to give a task as input."""
        assert isinstance(sink, BlobWriter), "a sink of new_upload()"
        sha256 = await asyncio.to_thread(sink.keep)  # file work: off the event loop
        row = FileRow(
            id=new_id("file"),
            principal_id=principal_id,
            filename=filename,
            bytes=sink.size,
            media_type=media_type,
            sha256=sha256,
            purpose=purpose,
            created_at=int(time.time()),
        )
        return rows.uploaded_file(await self.db.write(file_store.insert_file, row))

    async def uploaded(self, principal_id: str, file_ids: list[str]) -> list[records.UploadedFile]:
        """The principal's uploaded files among these ids, in their order (another's, or an
        unknown id, is left out)."""

        def look(tx: Tx) -> list[records.UploadedFile]:
            found = (file_store.get_file(tx, principal_id, file_id) for file_id in file_ids)
            return [rows.uploaded_file(row) for row in found if row is not None]

        return await self.db.read(look)

    # -- out -----------------------------------------------------------------------------
    async def of_session(self, principal_id: str, session_id: str) -> list[records.Artifact]:
        """Every artifact of every turn of the session, oldest first."""
        session = await self.sessions.get(principal_id, session_id)
        found = await self.db.read(artifact_store.for_session, session.id)
        return [rows.artifact(row) for row in found]

    async def archive(self, principal_id: str, session_id: str) -> Iterator[bytes]:
        """All of the session's artifacts as one zip, written as it is read."""
        return zip_stream(await self.of_session(principal_id, session_id), self.blobs.read_chunks)

    async def artifact(
        self, principal_id: str, container_id: str, file_id: str
    ) -> records.Artifact:
        """The artifact (404 file_not_found for another principal's, or one of a deleted
        session: it is gone with it, Files §5)."""

        def look(tx: Tx) -> records.Artifact:
            row = artifact_store.get_artifact(tx, principal_id, container_id, file_id)
            if (
                row is None
                or session_store.get_session(tx, principal_id, row.session_id) is None
                or not self.blobs.exists(row.sha256)
            ):
                raise file_not_found()
            return rows.artifact(row)

        return await self.db.read(look)

    async def download(self, principal_id: str, container_id: str, file_id: str) -> Download:
        found = await self.artifact(principal_id, container_id, file_id)
        return Download(found, self.blobs.read_chunks(found.sha256))

    def content(self, artifact: records.Artifact) -> Iterator[bytes]:
        """The bytes of an artifact this engine handed out."""
        return self.blobs.read_chunks(artifact.sha256)

    async def preview(
        self, principal_id: str, container_id: str, file_id: str
    ) -> tuple[records.Artifact, Path]:
        """The artifact and its PDF preview (Files §3.1); raises the protocol's 501 or 502
        when it cannot be converted."""
        found = await self.artifact(principal_id, container_id, file_id)
        return found, await self.previews.pdf(found)
