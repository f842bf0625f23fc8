"""A build's bookkeeping (Environments §4): started at once as the next version, run in the
background, its record written as each step ends, ended `ready` (the active version) or
`failed` (nothing else changes), its folder then read-only for good.

One build runs at a time per environment, decided by the database (`start_build`: None is
environment_busy). A build is a task of the principal that owns the environment: builds
take a slot of their own admission line (engine/turns/admission.py's fair queue: at most
UHP_ENVIRONMENT_MAX_CONCURRENT_BUILDS at once server-wide, shared between principals), so a
principal's flood of builds waits behind the others' rather than in front. File copies and
permission changes run on threads; the install itself is the Builder's (builder.py), which
runs it in the sandbox toolchain sessions run in.

A build a stopping server interrupts ends `failed` with the reason; one a crashed server left
`building` ends so at the next start (`open`: storage's abandon_builds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from storage import environments as store
from storage.db import Database, Order
from storage.tables import EnvironmentVersionRow
from uhp_server.environments.builder import Builder, BuildFailed, BuildRequest, BuildResult
from uhp_server.environments.folders import make_read_only, remove_folder, snapshot
from uhp_server.environments.layout import EnvironmentLayout, mount_path
from uhp_server.environments.names import as_declared
from uhp_server.environments.retention import Retention
from uhp_server.environments.source import SourceLocks, size_of

log = logging.getLogger(__name__)

MAX_LOG = 256 * 1024  # characters of a build's log kept: its tail, where the reason is
STOPPED = "The server stopped while this build ran."
COPYING, QUEUED, FINISHING = "copying files", "queued", "finishing"


def capped(text: str) -> str:
    if len(text) <= MAX_LOG:
        return text
    return "[… the log's start was cut …]\n" + text[-MAX_LOG:]


@dataclass(frozen=True)
class BuildOrder:
    """What a build is started with, read from the environment's row when it starts."""

    environment_id: str
    principal_id: str
    slug: str
    declared: dict[str, list[str]]
    python: str


class Slots(Protocol):
    """Where a build waits for its turn (engine/turns/admission.py's AdmissionQueue)."""

    async def acquire(self, holder: str, principal: str) -> None: ...

    def release(self, holder: str) -> None: ...


class _Progress:
    """The builder's steps, written to the record as each one ends (BuildProgress)."""

    def __init__(self, db: Database, environment_id: str, version: int) -> None:
        self.db = db
        self.environment_id = environment_id
        self.version = version
        self.log = ""

    async def step(self, stage: str, log: str) -> None:
        self.log = capped(log)
        await self.db.write(
            store.record_progress,
            self.environment_id,
            self.version,
            stage,
            self.log,
            order=Order.ANY,
        )


class Builds:
    def __init__(
        self,
        db: Database,
        layout: EnvironmentLayout,
        builder: Builder,
        admission: Slots,
        retention: Retention,
        agent_numbers: Callable[[str], Awaitable[int | None]],
        locks: SourceLocks,
    ) -> None:
        self.locks = locks
        self.db = db
        self.layout = layout
        self.builder = builder
        self.admission = admission
        self.retention = retention
        self.agent_numbers = agent_numbers
        self._running: dict[tuple[str, int], asyncio.Task[None]] = {}

    async def open(self) -> None:
        """At start-up: builds a stopped server left running end failed, then every
        environment's retention is applied."""
        left = await self.db.write(store.abandon_builds, order=Order.ANY)
        for environment_id, version in left:
            log.info(
                "environment_build_abandoned",
                extra={"environment": environment_id, "version": version},
            )
        await self.retention.sweep_all()

    async def close(self) -> None:
        """At shutdown: running builds are stopped, each ending failed with the reason."""
        running = dict(self._running)
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        # A task cancelled before its first step never ran, nor ended its build: ended here
        # (a build that did end stays as it ended).
        for environment_id, version in running:
            try:
                await self._end(environment_id, version, store.BuildEnd(False, "", STOPPED))
            except Exception:  # the rest of the shutdown goes on; start-up ends it instead
                log.exception("environment_build_not_ended", extra={"version": version})

    async def start(self, order: BuildOrder) -> EnvironmentVersionRow | None:
        """The new version's record as started (`building`), its build running; None while
        another build runs."""
        started = await self.db.write(store.start_build, order.environment_id, order=Order.ANY)
        if started is None:
            return None
        version = started.version
        key = (order.environment_id, version)
        task = asyncio.create_task(self._run(order, version), name=f"build {key}")
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))
        return started

    async def wait(self, environment_id: str, version: int) -> None:
        """Until that build's job is done here (tests; a shutdown)."""
        task = self._running.get((environment_id, version))
        if task is not None:
            await asyncio.wait({task})

    # -- one build ---------------------------------------------------------------------------
    async def _run(self, order: BuildOrder, version: int) -> None:
        progress = _Progress(self.db, order.environment_id, version)
        holder = f"{order.environment_id}/{version}"
        folder = self.layout.version(order.environment_id, version)
        try:
            await progress.step(QUEUED, "")
            await self.admission.acquire(holder, order.principal_id)
            try:
                end = await self._build(order, version, folder, progress)
            finally:
                self.admission.release(holder)
        except asyncio.CancelledError:
            await self._end(
                order.environment_id, version, store.BuildEnd(False, progress.log, STOPPED)
            )
            raise
        except Exception as exc:  # the build is over either way; the reason is kept
            log.exception("environment_build_error", extra={"environment": order.environment_id})
            reason = f"The build failed unexpectedly ({type(exc).__name__})."
            end = store.BuildEnd(False, progress.log, reason)
        await self._end(order.environment_id, version, end)
        await self.retention.sweep(order.environment_id)

    async def _build(
        self, order: BuildOrder, version: int, folder: Path, progress: _Progress
    ) -> store.BuildEnd:
        source = self.layout.source(order.environment_id)
        await progress.step(COPYING, "")
        async with self.locks.of(order.environment_id):
            await asyncio.to_thread(snapshot, source, folder)
        files = await asyncio.to_thread(size_of, folder)
        request = BuildRequest(
            environment_id=order.environment_id,
            principal_id=order.principal_id,
            agent_number=await self.agent_numbers(order.principal_id),
            version=version,
            folder=folder,
            mount=mount_path(order.slug),
            declared=as_declared(order.declared),
            python=order.python,
        )
        try:
            result: BuildResult = await self.builder.build(request, progress)
        except BuildFailed as failed:
            await asyncio.to_thread(make_read_only, folder)
            return store.BuildEnd(False, capped(failed.log or progress.log), failed.reason)
        await progress.step(FINISHING, capped(result.log))
        await asyncio.to_thread(make_read_only, folder)
        on_disk = await asyncio.to_thread(size_of, folder)
        packages = tuple(
            {"manager": p.manager, "name": p.name, "version": p.version} for p in result.packages
        )
        return store.BuildEnd(True, capped(result.log), "", packages, files.count, on_disk.bytes)

    async def _end(self, environment_id: str, version: int, end: store.BuildEnd) -> None:
        ended_now = await self.db.write(
            store.finish_build, environment_id, version, end, order=Order.ANY
        )
        if not ended_now:
            return  # it was over already: ended once, logged once
        log.info(
            "environment_build_ended",
            extra={"environment": environment_id, "version": version, "ready": end.ready},
        )

    async def remove_folders(self, environment_id: str) -> None:
        """A deleted environment's folders: its source and every version."""
        await asyncio.to_thread(remove_folder, self.layout.folder(environment_id))
