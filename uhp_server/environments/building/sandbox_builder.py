"""The Builder that runs an environment's build in the sandbox sessions run in.

Each step (python packages, node packages, system packages, setup.sh, finishing) is one
process started through `Sandbox.start` as the principal's agent, with the version's folder
mounted writable at the path sessions mount it at read-only, a scratch workspace and home of
the build's own, the principal's download cache (never another principal's: a shared pip or
npm cache would be a channel between tenants) and, when the operator gives one, a CA bundle
read-only. Package registries are reached only through the egress proxy (sandbox/egress.py)
and its allow-list; a build that needs them on a server without egress fails at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from harness_bases.base import Invocation
from uhp_server.environments.builder import (
    BuildFailed,
    BuildProgress,
    BuildRequest,
    BuildResult,
    Package,
    Runtimes,
)
from uhp_server.environments.building import packages, reuse, runtimes, steps
from uhp_server.environments.building.host_files import read_regular
from uhp_server.environments.building.limits import BuildLimits
from uhp_server.environments.building.log import BuildLog
from uhp_server.environments.building.steps import APT_ROOT, NODE_MODULES, VENV, Project
from uhp_server.environments.layout import EnvironmentLayout
from uhp_server.sandbox.base import (
    ExtraMount,
    Sandbox,
    SandboxedProcess,
    SandboxError,
    SessionMounts,
)
from uhp_server.sandbox.egress import EgressPolicy
from uhp_server.sandbox.limits import WATCH_SECONDS, disk_usage
from uhp_server.sandbox.ownership import hand_over
from uhp_server.settings import Settings

log = logging.getLogger(__name__)

PROGRESS_SECONDS = 3.0  # how often a running step's log so far is written to the record
APT_PACKAGES = "apt.list"  # in the version's notes: what was unpacked (a rebuild reusing apt/
# takes it along)
DPKG_DATABASE = "/var/lib/dpkg"  # the system's, read by apt to leave out what it has


class SandboxBuilder:
    """Builds versions in `sandbox` (Environments §4), under `settings`'
    UHP_ENVIRONMENT_BUILD_* limits, through `egress` (the server's allow-list)."""

    def __init__(self, sandbox: Sandbox, settings: Settings, egress: EgressPolicy) -> None:
        self.sandbox = sandbox
        self.settings = settings
        self.egress = egress
        self.layout = EnvironmentLayout(settings.environments_dir)
        self.limits = BuildLimits.from_settings(settings)
        self._runtimes: Runtimes | None = None
        # apt's lists are the principal's, in its cache: one apt at a time writes them.
        self._apt_locks: dict[str, asyncio.Lock] = {}

    def runtimes(self) -> Runtimes:
        """Found out once (a moment's process or container; runtimes.py)."""
        if self._runtimes is None:
            self._runtimes = runtimes.probe(self.sandbox)
        return self._runtimes

    def cache_folder(self, principal_id: str) -> Path:
        """The principal's download caches: named by a digest, so no principal's id is a
        path, and never shared with another principal."""
        name = hashlib.sha256(principal_id.encode()).hexdigest()[:32]
        return self.layout.cache / name

    def apt_lock(self, principal_id: str) -> asyncio.Lock:
        return self._apt_locks.setdefault(principal_id, asyncio.Lock())

    async def build(self, request: BuildRequest, progress: BuildProgress) -> BuildResult:
        scratch = self.layout.root / ".builds" / f"{request.environment_id}-{request.version}"
        run = _Build(self, request, progress, scratch)
        try:
            return await run.run()
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)


@dataclass(frozen=True)
class _Tree:
    """One installed tree of the version and what its step is."""

    name: str  # .venv, node_modules, apt
    stage: str  # Environments §4's stage name
    key: str
    needs_network: bool


class _Build:
    """One build: its folders, its log, its clock."""

    def __init__(
        self, builder: SandboxBuilder, request: BuildRequest, progress: BuildProgress, scratch: Path
    ) -> None:
        self.builder = builder
        self.sandbox = builder.sandbox
        self.request = request
        self.folder = request.folder
        self.notes = builder.layout.build_notes(request.environment_id, request.version)
        self.progress = progress
        self.scratch = scratch
        self.workspace = scratch / "workspace"
        self.home = scratch / "home"
        self.cache = builder.cache_folder(request.principal_id)
        self.log = BuildLog()
        self.limits = builder.limits
        self.deadline = time.monotonic() + self.limits.seconds if self.limits.seconds else None
        self.runtimes = Runtimes((), "", "")
        self.ca = False

    # -- the build ---------------------------------------------------------------------------

    async def run(self) -> BuildResult:
        self.runtimes = await asyncio.to_thread(self.builder.runtimes)
        project = await asyncio.to_thread(Project.read, self.folder, self.request.declared)
        interpreter = self._interpreter()
        trees = await asyncio.to_thread(self._trees, project, interpreter)
        self._refuse_without_network(trees)
        await asyncio.to_thread(self._prepare_folders)

        for tree in trees:
            await self.progress.step(tree.stage, self.log.text())
            if await asyncio.to_thread(self._reuse, tree, project):
                continue
            if tree.name == VENV:
                await self._run(tree.stage, steps.python_script(project, interpreter))
            elif tree.name == NODE_MODULES:
                await self._run(tree.stage, steps.node_script(project))
            else:
                async with self.builder.apt_lock(self.request.principal_id):
                    await self._run(
                        tree.stage,
                        steps.apt_script(project.declared.apt, self.builder.egress.enabled),
                    )
                await asyncio.to_thread(self._keep_apt_list)
            await asyncio.to_thread(reuse.stamp, self.folder, self.notes, tree.name, tree.key)
        if project.setup_sh:
            await self.progress.step("setup.sh", self.log.text())
            await self._run("setup.sh", steps.setup_script())
        await self.progress.step("finishing", self.log.text())
        pip_list = None
        if (self.folder / VENV / "pyvenv.cfg").is_file():
            await self._run("finishing", steps.finishing_script())
            pip_list = await asyncio.to_thread(read_regular, self.workspace, steps.PIP_REPORT)
        return BuildResult(await asyncio.to_thread(self._packages, pip_list), self.log.text())

    def _interpreter(self) -> str:
        wanted = self.request.python.strip()
        if not wanted:
            return "python3"
        if wanted in self.runtimes.python:
            return f"python{wanted}"
        have = ", ".join(self.runtimes.python) or "none"
        self.log.line(f"Python {wanted} is not available here (have: {have}); using python3.")
        return "python3"

    def _trees(self, project: Project, interpreter: str) -> list[_Tree]:
        """The trees this project's build makes, in §4's order, each with its key."""
        folder, declared = self.folder, self.request.declared
        system = {
            "sandbox": self.sandbox.name,
            "image": getattr(self.sandbox, "image", ""),
            "runtimes": self.runtimes,
            "mount": self.request.mount,
        }
        trees = []
        if project.python:
            manifests = reuse.file_digest(folder, ("requirements.txt", "pyproject.toml"))
            source = reuse.source_digest(folder) if project.pyproject else ""
            key = reuse.key(
                tree=VENV,
                system=system,
                python=interpreter,
                manifests=manifests,
                source=source,
                specs=declared.pip,
            )
            needs = project.python_needs_network(folder)
            trees.append(_Tree(VENV, "python packages", key, needs))
        if project.node:
            manifests = reuse.file_digest(folder, ("package.json", *steps.NODE_LOCKFILES))
            key = reuse.key(
                tree=NODE_MODULES, system=system, manifests=manifests, specs=declared.npm
            )
            trees.append(
                _Tree(NODE_MODULES, "node packages", key, project.node_needs_network(folder))
            )
        if project.apt:
            key = reuse.key(tree=APT_ROOT, system=system, specs=declared.apt)
            trees.append(_Tree(APT_ROOT, "system packages", key, True))
        return trees

    def _refuse_without_network(self, trees: list[_Tree]) -> None:
        """Fail at once, not after a registry's timeout, when a tree no earlier version
        made must be downloaded and the server allows no egress."""
        if self.builder.egress.enabled:
            return
        wanting = [
            tree.stage
            for tree in trees
            if tree.needs_network
            and reuse.earlier_tree(self.folder, self.notes, tree.name, tree.key) is None
        ]
        if wanting:
            raise BuildFailed(
                f"The build needs package registries ({', '.join(wanting)}), and this server "
                "allows no egress: its operator lists the registries' hosts in "
                "UHP_EGRESS_ALLOW_HOSTS.",
                self.log.text(),
            )

    def _prepare_folders(self) -> None:
        for folder in (self.workspace, self.home, self.scratch / "tools", self.cache):
            folder.mkdir(parents=True, exist_ok=True)
        bundle = self.builder.settings.environment_build_ca_bundle
        if bundle is not None:
            if not bundle.is_file():
                raise BuildFailed(
                    f"The CA bundle the server names (UHP_ENVIRONMENT_BUILD_CA_BUNDLE: {bundle}) "
                    "is not a file."
                )
            (self.scratch / "ca").mkdir(exist_ok=True)
            shutil.copyfile(bundle, self.scratch / "ca" / "ca.pem")
            (self.scratch / "ca" / "ca.pem").chmod(0o644)
            self.ca = True
        self._prune_cache()
        user = self._user()
        if user is not None:  # the sandbox hands over workspace and home itself
            hand_over(*user, self.folder, self.cache)

    def _prune_cache(self) -> None:
        """The cache is written by the build, so it counts towards the build's disk: one
        grown past half of it starts again empty."""
        if (
            self.limits.disk_bytes
            and disk_usage([self.cache], apparent=True).total_bytes > self.limits.disk_bytes // 2
        ):
            self.log.line("The download cache grew past half the build's disk limit: emptied.")
            shutil.rmtree(self.cache, ignore_errors=True)
            self.cache.mkdir(parents=True)

    def _user(self) -> tuple[int, int] | None:
        users = self.sandbox.users
        if users is None:
            return None
        return users.for_principal(self.request.agent_number)

    def _reuse(self, tree: _Tree, project: Project) -> bool:
        # setup.sh runs after and may write anywhere: it gets a copy, never shared inodes; a
        # server that is not root cannot make the earlier files root's: a copy too.
        link = reuse.may_link(setup_sh=project.setup_sh, root=os.geteuid() == 0)
        reused = reuse.reuse(
            self.folder,
            self.notes,
            tree.name,
            tree.key,
            link=link,
            disk_bytes=self.limits.disk_bytes,
        )
        if reused is None:
            return False
        if tree.name == APT_ROOT:
            earlier = self.builder.layout.build_notes(self.request.environment_id, reused.version)
            self._note_apt_list(read_regular(earlier, APT_PACKAGES))
        how = "hard links" if reused.linked else "a copy"
        self.log.line(
            f"{tree.name}: the same as version {reused.version}'s (same manifests, specs and "
            f"system): reused ({how}), nothing installed."
        )
        user = self._user()
        if not reused.linked and user is not None:
            hand_over(*user, self.folder / tree.name)
        return True

    def _keep_apt_list(self) -> None:
        """The apt step's report, from the build's workspace into the version's notes."""
        self._note_apt_list(read_regular(self.workspace, steps.APT_REPORT))

    def _note_apt_list(self, report: bytes | None) -> None:
        if report is not None:
            self.notes.mkdir(parents=True, exist_ok=True)
            (self.notes / APT_PACKAGES).write_bytes(report)

    def _packages(self, pip_list: bytes | None) -> tuple[Package, ...]:
        return (
            *packages.pip_packages(pip_list),
            *packages.npm_packages(self.folder),
            *packages.apt_packages(read_regular(self.notes, APT_PACKAGES)),
        )

    # -- one step ----------------------------------------------------------------------------

    def _mounts(self, apt: bool) -> SessionMounts:
        extra = [
            ExtraMount(self.folder, self.request.mount, writable=True),
            ExtraMount(self.cache, steps.CACHE_MOUNT, writable=True),
        ]
        if self.ca:
            extra.append(ExtraMount(self.scratch / "ca", steps.CA_MOUNT))
        # The local sandbox runs the host's own system without its dpkg database: apt
        # reads it there to leave out what the system already has.
        if apt and self.sandbox.name == "local" and Path(DPKG_DATABASE).is_dir():
            extra.append(ExtraMount(Path(DPKG_DATABASE), DPKG_DATABASE))
        return SessionMounts(
            workspace=self.workspace,
            home=self.home,
            tools=self.scratch / "tools",
            labels={
                "uhp.environment": self.request.environment_id,
                "uhp.build": str(self.request.version),
            },
            agent_number=self.request.agent_number,
            extra=tuple(extra),
            limits=self.limits.run_limits(),
        )

    async def _run(self, stage: str, script: str) -> None:
        """Run one step's script to its end; BuildFailed with the reason when it fails or
        crosses a limit (its process killed)."""
        env = steps.environment(self.request.mount, proxy=self.builder.egress.enabled, ca=self.ca)
        invocation = Invocation(["/bin/sh", "-c", script], env, self.request.mount)
        try:
            process = await self.sandbox.start(invocation, self._mounts(stage == "system packages"))
        except SandboxError as exc:
            log.warning("environment_build_sandbox_failed", extra={"reason": str(exc)})
            raise BuildFailed("The sandbox could not start the build.", self.log.text()) from exc
        try:
            await process.close_stdin()
            reason = await self._watch(stage, process)
        finally:
            await process.kill()
        if reason is None:
            reason = await process.limit_exceeded()
        code = await process.wait()
        if reason is None and code != 0:
            if code in (137, -9):
                reason = self.limits.killed_message(code)
            else:
                reason = f"The {stage} step failed (exit code {code})."
        if reason is not None:
            raise BuildFailed(reason, self.log.text())

    async def _watch(self, stage: str, process: SandboxedProcess) -> str | None:
        """Read the step's output into the log until it exits; the reason it was stopped
        (time, disk) or None. The record gets the log so far every few seconds."""
        reader = asyncio.create_task(self._read(process))
        watch = self.limits.disk_watch([self.folder, self.workspace, self.home, self.cache])
        next_progress = time.monotonic() + PROGRESS_SECONDS
        reported = self.log.size
        try:
            while not reader.done():
                await asyncio.wait({reader}, timeout=WATCH_SECONDS)
                now = time.monotonic()
                if self.deadline is not None and now > self.deadline:
                    return self.limits.time_message()
                if watch is not None and (reason := await watch.disk_reason()):
                    return reason
                if now >= next_progress and self.log.size != reported:
                    reported = self.log.size
                    next_progress = now + PROGRESS_SECONDS
                    await self.progress.step(stage, self.log.text())
            reader.result()
            # What the step left, measured once more: a file made between two looks (or a
            # step shorter than one) is the build's all the same.
            return None if watch is None else await watch.disk_reason(force=True)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, SandboxError):
                await reader

    async def _read(self, process: SandboxedProcess) -> None:
        try:
            async for line in process.lines():
                self.log.add(line + b"\n")
        except SandboxError as exc:  # a line past the sandbox's limit: the rest is unread
            self.log.line(str(exc))
