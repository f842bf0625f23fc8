"""What a turn does with files: place the task's attachments, then collect its artifacts.

The executor calls these around the CLI: `bring_in` and `baseline` once the previous turn's
process is gone and the base has written its config, `collect` once the CLI has reported its
outcome and before the terminal event (so the citations are part of the response).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from storage.blobs import BlobStore
from storage.tables import ArtifactRow
from uhp_server.engine.tasks.attachments import Placed, place_all
from uhp_server.engine.tasks.inputs import Attachment
from uhp_server.engine.turns.artifacts import ArtifactCollector, Snapshot, snapshot


class FileTurn(Protocol):
    """The parts of a Run this module reads."""

    response_id: str
    principal_id: str
    session_id: str
    container_id: str
    public_base_url: str
    plan: Any  # TurnPlan: workspace, attachments


def download_url(base_url: str, row: ArtifactRow) -> str:
    return f"{base_url.rstrip('/')}/v1/containers/{row.container_id}/files/{row.id}/content"


def citation(base_url: str, row: ArtifactRow) -> dict[str, Any]:
    """A `container_file_citation` without its span (the builder finds it in the text)."""
    return {
        "type": "container_file_citation",
        "container_id": row.container_id,
        "file_id": row.id,
        "filename": row.filename,
        "download_url": download_url(base_url, row),
    }


class TurnFiles:
    def __init__(self, blobs: BlobStore, collector: ArtifactCollector) -> None:
        self.blobs = blobs
        self.collector = collector

    async def bring_in(self, run: FileTurn) -> list[Placed]:
        """Place the attachments in the workspace; returns where each landed."""
        attachments: tuple[Attachment, ...] = run.plan.attachments
        if not attachments:
            return []
        return await asyncio.to_thread(place_all, run.plan.workspace, self.blobs, attachments)

    async def baseline(self, run: FileTurn) -> Snapshot:
        return await asyncio.to_thread(snapshot, run.plan.workspace)

    async def collect(
        self, run: FileTurn, before: Snapshot
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Store what the turn wrote; returns its citations and a notice of what was left out."""
        collected = await asyncio.to_thread(
            self.collector.collect,
            run.plan.workspace,
            before,
            principal_id=run.principal_id,
            session_id=run.session_id,
            container_id=run.container_id,
            response_id=run.response_id,
        )
        files = [citation(run.public_base_url, row) for row in collected.rows]
        return files, collected.notice()
