"""The application factory: builds the server's parts and mounts one router per chapter."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from harness_bases import registry
from harness_bases.base import HarnessBase
from storage.db import Database
from storage.responses import prune_idempotency
from uhp_server.catalog import ModelCatalog
from uhp_server.context import AppContext
from uhp_server.doors import oumi_harness
from uhp_server.doors.agentos.routes import router as agentos_router
from uhp_server.doors.api_docs import routes as api_docs
from uhp_server.doors.openai_chat import MOUNT_PATH, make_chat_app
from uhp_server.doors.oumi_tools.http import router as tool_router
from uhp_server.doors.oumi_tools.mcp import router as mcp_tool_router
from uhp_server.doors.uhp import (
    discovery,
    files,
    harness_events,
    harnesses,
    sessions,
    share,
    tasks,
)
from uhp_server.engine.admission import Admission, AdmissionQueue
from uhp_server.engine.cluster import Cluster
from uhp_server.engine.recovery import recover
from uhp_server.engine.runs import RunManager
from uhp_server.engine.shared_admission import SharedAdmission
from uhp_server.engine.tasks import TaskService
from uhp_server.engine.traces import TraceDeleter
from uhp_server.engine.turn import TurnExecutor
from uhp_server.errors import install_error_handlers
from uhp_server.files.parts import build_file_parts
from uhp_server.gateway.mcp_proxy import make_mcp_router
from uhp_server.gateway.proxy import make_gateway_router
from uhp_server.gateway.tokens import TokenRegistry
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.http.head_requests import HeadAsGet
from uhp_server.http.unread_bodies import CloseOnUnreadBody
from uhp_server.http.versioning import VersionMiddleware
from uhp_server.ops import routes as ops
from uhp_server.ops.metrics import Metrics
from uhp_server.ops.readiness import ReadinessProbe
from uhp_server.replica import replica_id
from uhp_server.sandbox.base import Sandbox
from uhp_server.settings import Settings

log = logging.getLogger("uhp_server.app")


def usable_bases(settings: Settings) -> dict[str, HarnessBase]:
    """Enabled bases whose pinned CLI is installed and runs. A base UHP_BASES names that
    cannot run is left out loudly; without UHP_BASES every registered base that is installed
    is enabled, and the others are only mentioned."""
    known = registry()
    named = settings.enabled_bases
    usable: dict[str, HarnessBase] = {}
    for name in known if named is None else named:
        base = known.get(name)
        if named is None and base is not None and not base.enabled_by_default:
            log.info("base_opt_in", extra={"base": name, "hint": "name it in UHP_BASES"})
        elif base is None:
            log.warning("unknown_base", extra={"base": name})
        elif base.installed_version(settings.tools_dir) != base.cli_version:
            hint = f"run: uhp-server bases install {name}"
            report = log.info if named is None else log.warning
            report("base_not_installed", extra={"base": name, "hint": hint})
        else:
            usable[name] = base
    return usable


def make_sandbox(settings: Settings, bases: dict[str, HarnessBase] | None = None) -> Sandbox:
    if settings.sandbox == "local":
        from uhp_server.sandbox.local import LocalSandbox

        return LocalSandbox.from_settings(settings)
    if settings.sandbox == "docker":
        from uhp_server.sandbox.docker import DockerSandbox, images
        from uhp_server.sandbox.docker.container import Limits
        from uhp_server.sandbox.egress import EgressPolicy

        limits = Limits(
            memory=settings.docker_memory,
            cpus=settings.docker_cpus,
            pids=settings.docker_pids_limit,
            tmp_size=settings.docker_tmp_size,
        )
        return DockerSandbox(
            settings.data_dir,
            image=settings.docker_image,
            packages=images.runtime_packages((bases or {}).values()),
            base_image=settings.docker_base_image,
            user=settings.docker_user,
            limits=limits,
            hosts=settings.docker_hosts,
            host_max_turns=settings.docker_host_max_turns,
            owner=settings.replica_id or "",
            egress=EgressPolicy.from_settings(
                settings.egress_allow_hosts, settings.egress_allow_private_hosts
            ),
        )
    raise ValueError(f"unknown sandbox {settings.sandbox!r} (UHP_SANDBOX)")


def build_context(
    settings: Settings,
    bases: dict[str, HarnessBase] | None = None,
    sandbox: Sandbox | None = None,
) -> AppContext:
    """`sandbox`: use this one instead of the one settings name (tests inject a fake)."""
    db = Database(settings.database)
    metrics = Metrics()
    db.on_event_commit = metrics.event_log_committed
    tokens = TokenRegistry()
    upstreams = Upstreams(settings)
    catalog = ModelCatalog(upstreams)
    file_parts = build_file_parts(settings, db)
    enabled = usable_bases(settings) if bases is None else bases
    sandbox = sandbox or make_sandbox(settings, enabled)
    replica = replica_id(settings.replica_id, settings.data_dir)
    cluster = None
    admission: Admission = AdmissionQueue(settings.max_concurrent_turns)
    if db.dialect.shared:  # replicas may share it: leases, tails, cancels, admission
        cluster = Cluster(db, replica, settings.replica_lease_seconds, sandbox)
        shared = SharedAdmission(
            db,
            replica,
            settings.max_concurrent_turns,
            settings.replica_lease_seconds,
            cluster.notes,
        )
        shared.lease_current = cluster.lease_current
        cluster.on_lapsed = shared.lease_lapsed
        cluster.on_lease_round = shared.look_at_line
        admission = shared
    executor = TurnExecutor(
        sandbox,
        tokens,
        settings.tools_dir,
        settings.cancel_grace_seconds,
        files=file_parts.turn_files,
        admission=admission,
        metrics=metrics,
    )
    runs = RunManager(
        db, executor, paused_keep_seconds=settings.paused_turn_keep_seconds, replica_id=replica
    )
    runs.cluster = cluster
    executor.asker = runs.ask  # a CLI's own question tool asks like ask_user does
    return AppContext(
        settings=settings,
        db=db,
        bases=enabled,
        tokens=tokens,
        upstreams=upstreams,
        catalog=catalog,
        runs=runs,
        tasks=TaskService(settings, db, enabled, catalog, runs, blobs=file_parts.blobs),
        blobs=file_parts.blobs,
        previews=file_parts.previews,
        traces=TraceDeleter(
            db,
            runs,
            file_parts.blobs,
            settings.sessions_dir,
            settings.previews_dir,
            settings.cancel_grace_seconds,
        ),
        metrics=metrics,
        readiness=ReadinessProbe(db, sandbox, settings.data_dir / "readyz"),
    )


@asynccontextmanager
async def _serving(ctx: AppContext, app: FastAPI) -> AsyncIterator[None]:
    """Recovery, the cluster and the sandbox, for as long as the server serves."""
    cluster = ctx.runs.cluster
    if cluster is not None:
        await cluster.open(ctx.runs)  # recovers only what no live replica runs
    else:
        await asyncio.to_thread(recover, ctx.db)  # appends through the writer, and waits
    retention = ctx.settings.idempotency_retention_hours * 3600
    await ctx.db.write(prune_idempotency, time.time() - retention)
    sandbox = ctx.runs.executor.sandbox
    await sandbox.open(app)  # e.g. the docker sandbox serves the gateway on a socket
    try:
        yield
    finally:
        await ctx.runs.shutdown()
        if cluster is not None:
            await cluster.close()
        await sandbox.close()
        await ctx.upstreams.aclose()


def create_app(
    settings: Settings,
    bases: dict[str, HarnessBase] | None = None,
    sandbox: Sandbox | None = None,
) -> FastAPI:
    ctx = build_context(settings, bases, sandbox)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await ctx.db.bind_loop()  # PostgreSQL: the hot statements go from this loop
        try:
            async with _serving(ctx, _app):
                yield
        finally:
            # Its threads and connections (a PostgreSQL server counts every one of them).
            await ctx.db.unbind_loop()
            await asyncio.to_thread(ctx.db.close)

    app = FastAPI(
        title="UHP Server",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        redirect_slashes=False,  # a redirect would echo the Host header back as a Location
    )
    app.state.ctx = ctx
    install_error_handlers(app)
    for router in (discovery.router, harnesses.router, tasks.router, sessions.router):
        app.include_router(router)
    app.include_router(make_gateway_router(ctx.tokens, ctx.upstreams, ctx.metrics))
    app.include_router(make_mcp_router(ctx.tokens, ctx.upstreams.http, ctx.runs.ask_by_token))
    for router in (files.router, share.router, harness_events.router, api_docs.router, ops.router):
        app.include_router(router)
    app.include_router(oumi_harness.router)
    for router in (tool_router, mcp_tool_router, agentos_router):  # more front doors
        app.include_router(router)
    app.mount(MOUNT_PATH, make_chat_app(ctx))  # the Chat Completions door, in OpenAI's shapes
    app.add_middleware(VersionMiddleware)
    app.add_middleware(CloseOnUnreadBody)
    app.add_middleware(HeadAsGet)
    return app
