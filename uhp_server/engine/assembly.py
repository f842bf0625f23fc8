"""The engine's facade put together from its parts, by constructors, in one place."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from harness_bases.base import HarnessBase
from storage.blobs import BlobStore
from storage.db import Database
from uhp_server.catalog import ModelCatalog
from uhp_server.engine.engine import Engine
from uhp_server.engine.facade.agent_memories import AgentMemories
from uhp_server.engine.facade.environments import (
    EnvironmentLimits,
    Environments,
    PrincipalQuota,
)
from uhp_server.engine.facade.files import Files
from uhp_server.engine.facade.harnesses import Harnesses
from uhp_server.engine.facade.memories import Memories
from uhp_server.engine.facade.memory_replays import Replays
from uhp_server.engine.facade.memory_tools import MemoryTools
from uhp_server.engine.facade.principals import Principals
from uhp_server.engine.facade.session_deletion import SessionDeleter
from uhp_server.engine.facade.sessions import Sessions
from uhp_server.engine.facade.shares import Shares
from uhp_server.engine.facade.sign_ins import SignIns
from uhp_server.engine.facade.usage import Usage
from uhp_server.engine.tasks.intake import TaskIntake
from uhp_server.engine.tasks.steering import TaskSteering
from uhp_server.engine.turns.admission import AdmissionQueue
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.environments.builder import Builder
from uhp_server.environments.builds import Builds
from uhp_server.environments.git_fetch import GitFetcher
from uhp_server.environments.importing import ImportLimits
from uhp_server.environments.layout import EnvironmentLayout
from uhp_server.environments.package_check import PackageChecker
from uhp_server.environments.retention import Retention
from uhp_server.environments.source import SourceLocks
from uhp_server.files.previews import PreviewRenderer
from uhp_server.memories.provider import Embedder, MemoryProvider
from uhp_server.memories.registry import ProviderSetup, build_providers
from uhp_server.sandbox.egress import EgressPolicy
from uhp_server.settings import Settings


def assemble_engine(
    settings: Settings,
    db: Database,
    bases: dict[str, HarnessBase],
    catalog: ModelCatalog,
    runs: RunRegistry,
    blobs: BlobStore,
    environments: Environments,
    embedder: Embedder | None = None,
) -> Engine:
    """The facade over a running engine (`runs`): every door's one way in. `embedder`: the
    configured model provider's embeddings, for the memory providers that use one."""
    previews = PreviewRenderer(
        settings.soffice, settings.previews_dir, blobs, settings.preview_timeout_seconds
    )
    deleter = SessionDeleter(
        db, runs, blobs, settings.sessions_dir, settings.previews_dir, settings.cancel_grace_seconds
    )
    memories = Memories(
        db,
        providers := memory_providers(settings, db, embedder),
        default_provider=next(iter(providers)),
        replays=Replays(db, settings.idempotency_retention_hours * 3600),
        blobs=blobs,
        max_per_principal=settings.memory_max_per_principal or None,
    )
    agent_memories = AgentMemories(db, memories, served=settings.memories != "off")
    runs.observe = agent_memories.observe  # each finished turn, into its default memory
    runs.executor.compacted = agent_memories.compacted  # its next turn primed afresh
    intake = TaskIntake(settings, db, bases, catalog, runs, blobs=blobs, memories=agent_memories)
    steering = TaskSteering(settings, db, bases, runs, intake)
    sessions = Sessions(db, runs, deleter, steering)
    files = Files(db, blobs, previews, sessions, settings.max_file_bytes)
    principals = Principals(db, settings.api_key)
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
        principals=principals,
        sign_ins=SignIns(db, principals, settings.console_session_hours * 3600),
        usage=Usage(db),
        environments=environments,
        memories=memories,
        agent_memories=agent_memories,
        memory_tools=MemoryTools(memories),
    )


def memory_providers(
    settings: Settings, db: Database, embedder: Embedder | None
) -> dict[str, MemoryProvider]:
    """The providers UHP_MEMORY_PROVIDERS connects, in its order: the first is the default
    (registry.ProviderSetupError stops start-up for one that cannot be used)."""
    return build_providers(
        settings.memory_providers,
        lambda name: ProviderSetup(db, embedder, settings.data_dir / "memory-providers" / name),
    )


def assemble_environments(
    settings: Settings,
    db: Database,
    builder: Builder,
    egress: EgressPolicy,
    agent_numbers: Callable[[str], Awaitable[int | None]],
) -> Environments:
    """The Environments chapter: its builds (a fair line of their own), retention, imports
    and the package check, over `builder` (the sandbox toolchain's, in context.py)."""
    layout = EnvironmentLayout(settings.environments_dir)
    locks = SourceLocks()
    retention = Retention(db, layout, settings.environment_keep_versions)
    slots = AdmissionQueue(
        settings.environment_max_concurrent_builds, settings.environment_max_builds_per_principal
    )
    builds = Builds(db, layout, builder, slots, retention, agent_numbers, locks)
    limits = EnvironmentLimits(
        max_file_bytes=settings.environment_max_file_bytes,
        imports=ImportLimits(
            max_file_bytes=settings.environment_max_file_bytes,
            max_bytes=settings.environment_max_import_bytes,
            max_files=settings.environment_max_import_files,
        ),
        principal=PrincipalQuota(
            max_environments=settings.environment_max_per_principal,
            max_bytes=settings.environment_max_source_bytes_per_principal,
            max_files=settings.environment_max_source_files_per_principal,
        ),
        max_concurrent_imports=settings.environment_max_concurrent_imports,
    )
    checker = PackageChecker(
        settings.environment_package_check_timeout_seconds,
        settings.environment_package_check_cache_seconds,
    )
    git = GitFetcher(egress, "git", settings.environment_git_timeout_seconds)
    return Environments(db, layout, builder, builds, retention, checker, git, limits, locks)
