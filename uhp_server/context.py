"""The server's long-lived parts, built once per app (`build_context`): the engine every door
calls, and what the gateway, operations and the lifespan need besides; and what they do for as
long as the server serves (`serving`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request

from harness_bases import registry
from harness_bases.base import HarnessBase
from storage import keys, mcp_secrets
from storage.blobs import BlobStore
from storage.db import Database, Order
from storage.responses import prune_idempotency
from storage.sealing import load_sealer
from uhp_server.catalog import ModelCatalog
from uhp_server.engine import Engine
from uhp_server.engine.assembly import assemble_engine, assemble_environments
from uhp_server.engine.replicas.cluster import Cluster, listener
from uhp_server.engine.replicas.fair_admission import FairSharedAdmission
from uhp_server.engine.replicas.lease import Lease
from uhp_server.engine.replicas.peers import NoPeers, Peers
from uhp_server.engine.replicas.shared_admission import SharedAdmission
from uhp_server.engine.turns.admission import Admission, AdmissionQueue, share_per_principal
from uhp_server.engine.turns.artifacts import ArtifactCollector, ArtifactLimits
from uhp_server.engine.turns.executor import TurnExecutor
from uhp_server.engine.turns.files import TurnFiles
from uhp_server.engine.turns.recovery import recover
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.engine.turns.warm import WarmAgents
from uhp_server.environments.builder import Builder
from uhp_server.environments.building import SandboxBuilder
from uhp_server.gateway.embeddings import embedder_for
from uhp_server.gateway.provider_hints import warn_unserved
from uhp_server.gateway.tokens import TokenRegistry
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.harnesses.default_base import choose_default_base, default_first
from uhp_server.ops.metrics import Metrics
from uhp_server.ops.readiness import ReadinessProbe
from uhp_server.ops.replica_id import replica_id
from uhp_server.sandbox.agent_user import host_ids_within
from uhp_server.sandbox.base import Sandbox
from uhp_server.sandbox.egress import EgressPolicy
from uhp_server.sandbox.registry import make_sandbox
from uhp_server.settings import Settings


@dataclass
class AppContext:
    settings: Settings
    db: Database
    bases: dict[str, HarnessBase]  # the enabled and installed bases, the default one first
    tokens: Any  # gateway.tokens.TokenRegistry
    upstreams: Any  # gateway.upstreams.Upstreams
    catalog: ModelCatalog
    runs: RunRegistry
    engine: Engine  # the doors' one way in
    blobs: BlobStore  # uploads and artifacts, content-addressed
    metrics: Metrics
    readiness: ReadinessProbe


log = logging.getLogger("uhp_server.app")  # (the name the server has always logged under)


AGENT_NUMBER_TRIES = 8


async def agent_number_of(db: Database, principal_id: str) -> int:
    """The principal's agent number (storage/keys.py), given on first use; a race with
    another principal's first turn for the same number is lost, then retried (each loss means
    another principal took a number, so a few tries outlast any burst of first turns)."""
    given = await db.read(keys.given_agent_number, principal_id)
    if given is not None:  # every turn but a principal's first: no write
        return given
    for _ in range(AGENT_NUMBER_TRIES - 1):
        try:
            return await db.write(keys.agent_number, principal_id, order=Order.ANY)
        except db.dialect.integrity_error:
            continue
    return await db.write(keys.agent_number, principal_id, order=Order.ANY)


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


def with_default_first(bases: dict[str, HarnessBase], settings: Settings) -> dict[str, HarnessBase]:
    """The bases, the default one first (harnesses/default_base.py), said in the start log."""
    chosen = choose_default_base(settings.default_base, list(bases), registry)
    if chosen is not None:
        log.info("default_base", extra={"base": chosen.name, "chosen_by": chosen.chosen_by})
    return default_first(bases, chosen)


def _seal_stored_secrets(db: Database) -> None:
    """Secrets stored before they were sealed, or sealed with a key being rotated out, are
    sealed with the current key before anything else runs (storage/sealing.py)."""
    done = db.run(mcp_secrets.reseal)
    if done.resealed:
        log.info("secrets_resealed", extra={"count": done.resealed})
    if done.unreadable:
        log.error(
            "secrets_unreadable",
            extra={
                "count": done.unreadable,
                "hint": "sealed with a key missing from UHP_SECRETS_KEY / secrets.key",
            },
        )


def sandbox_builder(sandbox: Sandbox, settings: Settings, egress: EgressPolicy) -> Builder:
    """The Builder environments are built with: the sandbox toolchain's (Environments §4)."""
    return SandboxBuilder(sandbox, settings, egress)


def build_context(
    settings: Settings,
    bases: dict[str, HarnessBase] | None = None,
    sandbox: Sandbox | None = None,
    builder: Builder | None = None,
) -> AppContext:
    """`sandbox`, `builder`: use these instead of the ones settings name (tests inject
    fakes). DefaultBaseError when UHP_DEFAULT_BASE names a base that is not enabled."""
    enabled = with_default_first(usable_bases(settings) if bases is None else bases, settings)
    db = Database(settings.database, load_sealer(settings.secrets_key, settings.data_dir))
    if db.dialect.shared and not settings.secrets_key:
        # Each replica's data directory would make a key of its own: another replica could
        # not open the secrets this one sealed.
        log.warning(
            "secrets_key_file_on_a_shared_database",
            extra={"hint": "set the same UHP_SECRETS_KEY on every replica"},
        )
    _seal_stored_secrets(db)
    metrics = Metrics()
    db.on_event_commit = metrics.event_log_committed
    tokens = TokenRegistry()
    upstreams = Upstreams(settings)
    warn_unserved(enabled.values(), upstreams.providers.values(), settings)
    catalog = ModelCatalog(upstreams)
    blobs = BlobStore(settings.blobs_dir)
    sandbox = sandbox or make_sandbox(settings, enabled.values())
    replica = replica_id(settings.replica_id, settings.data_dir)
    admission: Admission = AdmissionQueue(
        settings.max_concurrent_turns, settings.max_turns_per_principal
    )
    peers: Peers = NoPeers(functools.partial(asyncio.to_thread, recover, db))
    if db.dialect.shared:  # replicas may share it: leases, tails, cancels, admission
        lease = Lease(settings.replica_lease_seconds)
        notes = listener(db, replica)
        shared = SharedAdmission(db, replica, settings.max_concurrent_turns, lease, notes)
        peers = Cluster(db, replica, lease, sandbox, notes, shared)
        share = share_per_principal(settings.max_concurrent_turns, settings.max_turns_per_principal)
        admission = FairSharedAdmission(shared, share)  # a principal's share first
    limits = ArtifactLimits(
        max_count=settings.max_artifacts_per_session,
        max_file_bytes=settings.max_artifact_bytes,
        max_session_bytes=settings.max_session_artifact_bytes,
    )
    executor = TurnExecutor(
        sandbox,
        tokens,
        settings.tools_dir,
        settings.cancel_grace_seconds,
        files=TurnFiles(blobs, ArtifactCollector(db, blobs, limits)),
        admission=admission,
        metrics=metrics,
        agent_numbers=functools.partial(agent_number_of, db),
        # Idle warm processes at most as many as turns may run at once (engine/turns/warm.py).
        warm=WarmAgents(tokens, limit=settings.max_concurrent_turns),
    )
    runs = RunRegistry(
        db,
        executor,
        peers,
        paused_keep_seconds=settings.paused_turn_keep_seconds,
        replica_id=replica,
    )
    egress = EgressPolicy.from_settings(
        settings.egress_allow_hosts, settings.egress_allow_private_hosts
    )
    environments = assemble_environments(
        settings,
        db,
        builder or sandbox_builder(sandbox, settings, egress),
        egress,
        functools.partial(agent_number_of, db),
    )
    embedder = embedder_for(settings, upstreams)  # None unless UHP_MEMORY_EMBEDDING_MODEL
    engine = assemble_engine(settings, db, enabled, catalog, runs, blobs, environments, embedder)
    return AppContext(
        settings=settings,
        db=db,
        bases=enabled,
        tokens=tokens,
        upstreams=upstreams,
        catalog=catalog,
        runs=runs,
        engine=engine,
        blobs=blobs,
        metrics=metrics,
        readiness=ReadinessProbe(db, sandbox, settings.data_dir / "readyz"),
    )


@asynccontextmanager
async def serving(ctx: AppContext, app: FastAPI) -> AsyncIterator[None]:
    """Recovery, the other replicas and the sandbox, for as long as the server serves."""
    peers = ctx.runs.peers
    await peers.open(ctx.runs)  # recovers only what no live replica runs
    retention = ctx.settings.idempotency_retention_hours * 3600
    await ctx.db.write(prune_idempotency, time.time() - retention)
    await ctx.engine.memories.replays.prune()  # the Memories chapter's, by the same retention
    sandbox = ctx.runs.executor.sandbox
    await sandbox.open(app)  # e.g. the docker sandbox serves the gateway on a socket
    environments = ctx.engine.environments
    await environments.open()  # abandoned builds end failed; retention applied
    users = sandbox.users if sandbox.per_principal_users else None
    if users is not None and (clashes := host_ids_within(users.uid_range)):
        log.warning(
            "agent_uid_range_overlaps_host_ids: UHP_AGENT_UID_RANGE holds ids the host uses "
            "(%s): a host process with one shares a principal's agent's uid; move the range",
            "; ".join(clashes[:5]),
        )
    try:
        yield
    finally:
        await environments.close()  # running builds stop, each recorded failed
        await ctx.runs.shutdown()
        await peers.close()
        await sandbox.close()
        await ctx.engine.memories.aclose()  # a provider's own store (mem0's files) closed
        await ctx.upstreams.aclose()


def get_ctx(request: Request) -> AppContext:
    return request.app.state.ctx


Ctx = Annotated[AppContext, Depends(get_ctx)]
