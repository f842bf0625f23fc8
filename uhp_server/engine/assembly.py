"""The engine's facade put together from its parts, by constructors, in one place."""

from __future__ import annotations

from harness_bases.base import HarnessBase
from storage.blobs import BlobStore
from storage.db import Database
from uhp_server.catalog import ModelCatalog
from uhp_server.engine.engine import Engine
from uhp_server.engine.facade.files import Files
from uhp_server.engine.facade.harnesses import Harnesses
from uhp_server.engine.facade.principals import Principals
from uhp_server.engine.facade.session_deletion import SessionDeleter
from uhp_server.engine.facade.sessions import Sessions
from uhp_server.engine.facade.shares import Shares
from uhp_server.engine.tasks.intake import TaskIntake
from uhp_server.engine.tasks.steering import TaskSteering
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.files.previews import PreviewRenderer
from uhp_server.settings import Settings


def assemble_engine(
    settings: Settings,
    db: Database,
    bases: dict[str, HarnessBase],
    catalog: ModelCatalog,
    runs: RunRegistry,
    blobs: BlobStore,
) -> Engine:
    """The facade over a running engine (`runs`): every door's one way in."""
    previews = PreviewRenderer(
        settings.soffice, settings.previews_dir, blobs, settings.preview_timeout_seconds
    )
    deleter = SessionDeleter(
        db, runs, blobs, settings.sessions_dir, settings.previews_dir, settings.cancel_grace_seconds
    )
    intake = TaskIntake(settings, db, bases, catalog, runs, blobs=blobs)
    steering = TaskSteering(settings, db, bases, runs, intake)
    sessions = Sessions(db, runs, deleter, steering)
    files = Files(db, blobs, previews, sessions, settings.max_file_bytes)
    return Engine(
        settings=settings,
        bases=bases,
        db=db,
        runs=runs,
        intake=intake,
        steering=steering,
        sessions=sessions,
        files=files,
        shares=Shares(db, runs, sessions, files),
        harnesses=Harnesses(settings, db, bases, catalog, runs),
        principals=Principals(db, settings.api_key),
    )
