"""The server's long-lived parts, built once per app (app.py): the engine every door calls,
and what the gateway, operations and the lifespan need besides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from harness_bases.base import HarnessBase
from storage.blobs import BlobStore
from storage.db import Database
from uhp_server.catalog import ModelCatalog
from uhp_server.engine import Engine
from uhp_server.engine.runs import RunManager
from uhp_server.ops.metrics import Metrics
from uhp_server.ops.readiness import ReadinessProbe
from uhp_server.settings import Settings


@dataclass
class AppContext:
    settings: Settings
    db: Database
    bases: dict[str, HarnessBase]  # the enabled and installed bases
    tokens: Any  # gateway.tokens.TokenRegistry
    upstreams: Any  # gateway.upstreams.Upstreams
    catalog: ModelCatalog
    runs: RunManager
    engine: Engine  # the doors' one way in
    blobs: BlobStore  # uploads and artifacts, content-addressed
    metrics: Metrics
    readiness: ReadinessProbe


def get_ctx(request: Request) -> AppContext:
    return request.app.state.ctx


Ctx = Annotated[AppContext, Depends(get_ctx)]
