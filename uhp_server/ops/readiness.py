"""Readiness: can this server take a task now? (`GET /readyz`)

Two checks: the database answers a query, and the sandbox starts a process (`/bin/true` in a
folder of its own). Starting a sandbox costs tens of milliseconds (bubblewrap) to a second
(docker), so its answer is kept for PROBE_CACHE_SECONDS and concurrent probes share one
start: a load balancer's probe storm costs one sandbox every few seconds, whatever its rate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from harness_bases.base import SYSTEM_PATH, Invocation
from storage.db import Database
from storage.unit import Tx
from uhp_server.sandbox.base import Sandbox, SandboxedProcess, SessionMounts

log = logging.getLogger("uhp_server.ops.readiness")

PROBE_CACHE_SECONDS = 5.0
DATABASE_TIMEOUT_SECONDS = 2.0
SANDBOX_TIMEOUT_SECONDS = 20.0  # a cold docker engine can take seconds to start a container


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str | None = None  # why not, in a short sentence (no detail an attacker could use)


class ReadinessProbe:
    def __init__(self, db: Database, sandbox: Sandbox, folder: Path) -> None:
        self.db = db
        self.sandbox = sandbox
        self.folder = folder  # the probe's own workspace, home and tools, never a session's
        self._sandbox_answer: tuple[float, str | None] | None = None  # (when, failure)
        self._probing: asyncio.Task[str | None] | None = None

    async def check(self) -> Readiness:
        if not await self._database_answers():
            return Readiness(False, "The database does not answer.")
        failure = await self._sandbox_failure()
        if failure is not None:
            return Readiness(False, failure)
        return Readiness(True)

    async def _database_answers(self) -> bool:
        if not self.db.writer_alive:
            log.error("readiness_database_writer_dead")
            return False
        try:
            await asyncio.wait_for(self.db.read(_select_one), DATABASE_TIMEOUT_SECONDS)
        except Exception:
            log.warning("readiness_database_failed", exc_info=True)
            return False
        return True

    async def _sandbox_failure(self) -> str | None:
        answer = self._sandbox_answer
        if answer is not None and time.monotonic() - answer[0] < PROBE_CACHE_SECONDS:
            return answer[1]
        if self._probing is None:
            self._probing = asyncio.create_task(self._probe_sandbox())
        probing = self._probing
        try:
            # Shielded: a prober that gives up (its client went away) leaves the probe to the
            # others waiting on it.
            failure = await asyncio.shield(probing)
        finally:
            if probing.done() and self._probing is probing:
                self._probing = None
        return failure

    async def _probe_sandbox(self) -> str | None:
        failure: str | None = None
        try:
            code = await asyncio.wait_for(self._run_true(), SANDBOX_TIMEOUT_SECONDS)
            if code != 0:
                failure = f"The sandbox started a probe process that exited with {code}."
        except TimeoutError:
            failure = "The sandbox did not run a probe process in time."
        except Exception:
            log.warning("readiness_sandbox_failed", exc_info=True)
            failure = "The sandbox cannot start a process."
        self._sandbox_answer = (time.monotonic(), failure)
        return failure

    async def _run_true(self) -> int:
        mounts = SessionMounts(
            workspace=self.folder / "workspace",
            home=self.folder / "home",
            tools=self.folder / "tools",
            labels={"uhp.probe": "readyz"},
        )
        await asyncio.to_thread(_make_dirs, mounts)
        paths = self.sandbox.paths
        invocation = Invocation(
            argv=["/bin/true"], env={"PATH": SYSTEM_PATH, "HOME": paths.home}, cwd=paths.workspace
        )
        proc: SandboxedProcess = await self.sandbox.start(invocation, mounts)
        try:
            return await proc.wait()
        finally:
            await proc.kill()


def _select_one(tx: Tx) -> None:
    tx.rows("SELECT 1")


def _make_dirs(mounts: SessionMounts) -> None:
    for folder in (mounts.workspace, mounts.home, mounts.tools):
        folder.mkdir(parents=True, exist_ok=True)
