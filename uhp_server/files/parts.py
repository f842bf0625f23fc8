"""The parts behind files in and artifacts out, built once per app from the settings."""

from __future__ import annotations

from dataclasses import dataclass

from storage.blobs import BlobStore
from storage.db import Database
from uhp_server.engine.artifacts import ArtifactCollector, ArtifactLimits
from uhp_server.engine.turn_files import TurnFiles
from uhp_server.files.previews import PreviewRenderer
from uhp_server.settings import Settings


@dataclass
class FileParts:
    blobs: BlobStore
    turn_files: TurnFiles
    previews: PreviewRenderer


def build_file_parts(settings: Settings, db: Database) -> FileParts:
    blobs = BlobStore(settings.blobs_dir)
    limits = ArtifactLimits(
        max_count=settings.max_artifacts_per_session,
        max_file_bytes=settings.max_artifact_bytes,
        max_session_bytes=settings.max_session_artifact_bytes,
    )
    return FileParts(
        blobs=blobs,
        turn_files=TurnFiles(blobs, ArtifactCollector(db, blobs, limits)),
        previews=PreviewRenderer(
            settings.soffice, settings.previews_dir, blobs, settings.preview_timeout_seconds
        ),
    )
