"""Several Docker engines behind one docker sandbox (UHP_DOCKER_HOSTS).

Each turn goes to the least loaded engine that is up and under its cap
(UHP_DOCKER_HOST_MAX_TURNS). An engine that stops answering, on a turn's call or on a health
probe, leaves the rotation at once: the turns running there fail naming it, and it is probed
again with growing pauses until it answers, then joins again (its leftovers reaped and the
runtime image made present first, by the sandbox's `join` function).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import docker
import docker.errors
import docker.utils
import requests.exceptions

from uhp_server.sandbox.base import SandboxError
from uhp_server.sandbox.docker.host_paths import HostPaths

log = logging.getLogger(__name__)

CLIENT_TIMEOUT_SECONDS = 60  # one engine call; an attach or a wait has no timeout of its own
PROBE_TIMEOUT_SECONDS = 5.0
HEALTH_INTERVAL_SECONDS = 5.0  # how often an engine in rotation is pinged
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 10.0
LOOP_TICK_SECONDS = 0.5
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


class TurnOnEngine(Protocol):
    """What the pool needs of a turn running on an engine: a way to end it for a lost one."""

    def engine_lost(self, reason: str) -> None: ...


@dataclass(eq=False)
class Engine:
    """One Docker engine: `url` as configured ("" is the one the environment names)."""

    url: str
    api: Any = None
    host_paths: HostPaths = field(default_factory=HostPaths)
    up: bool = False
    turns: set[TurnOnEngine] = field(default_factory=set)
    reserved: int = 0  # turns placed here whose container is still being started
    failed_probes: int = 0
    next_probe: float = 0.0

    @property
    def name(self) -> str:
        return self.url or os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET

    @property
    def load(self) -> int:
        return len(self.turns) + self.reserved

    def shares_our_mounts(self) -> bool:
        """Whether the engine sees this server's mounts as they are: a Unix socket served
        by a process in the server's own mount namespace (not a remote engine, nor the
        server in a container of its own)."""
        if not self.name.startswith("unix://"):
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(PROBE_TIMEOUT_SECONDS)
                sock.connect(self.name.removeprefix("unix://"))
                creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            pid = struct.unpack("3i", creds)[0]  # 0: a process beyond our pid namespace
            theirs, ours = os.stat(f"/proc/{pid}/ns/mnt"), os.stat("/proc/self/ns/mnt")
            return pid > 0 and (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)
        except OSError:
            return False

    def connect(self) -> Any:
        """A low-level SDK client for this engine that has answered a ping."""
        if not self.url:
            api = docker.from_env(timeout=CLIENT_TIMEOUT_SECONDS).api
        else:
            options: dict[str, Any] = {"timeout": CLIENT_TIMEOUT_SECONDS}
            if self.url.startswith("ssh://"):
                options["use_ssh_client"] = True  # the ssh binary and its config, no paramiko
            elif self.url.startswith("tcp://"):
                tls = docker.utils.kwargs_from_env().get("tls")  # DOCKER_TLS_VERIFY/_CERT_PATH
                if tls:
                    options["tls"] = tls
            api = docker.APIClient(base_url=self.url, **options)
        api.ping()
        return api


def parse_hosts(setting: str) -> list[str]:
    """UHP_DOCKER_HOSTS as engine urls; empty: the one engine of the environment."""
    urls = [part.strip() for part in setting.split(",") if part.strip()]
    return urls or [""]


def unreachable(exc: BaseException) -> bool:
    """True when `exc` says the engine did not answer (not that it refused a request)."""
    if isinstance(exc, docker.errors.APIError):
        return False
    return isinstance(exc, requests.exceptions.RequestException | OSError) or (
        isinstance(exc, docker.errors.DockerException) and "connect" in str(exc).lower()
    )


def lost_reason(engine: Engine) -> str:
    return f"The docker engine {engine.name} stopped answering while the turn ran on it."


class EnginePool:
    def __init__(self, urls: list[str], max_turns: int, join: Callable[[Engine], None]) -> None:
        """`join(engine)` (run on a thread) readies an engine that answers: connects it
        (engine.api), reaps its leftovers, makes the image present. It raises when it
        cannot."""
        self.engines = [Engine(url) for url in urls]
        self.max_turns = max_turns  # 0: no cap of the engine's own
        self._join = join
        self._health: asyncio.Task[None] | None = None
        # Joins run beside the health loop: one may copy the image for a minute.
        self._joining: dict[Engine, asyncio.Task[str | None]] = {}

    def up_engines(self) -> list[Engine]:
        return [engine for engine in self.engines if engine.up]

    async def open(self) -> None:
        """Join every engine that answers, one after the other (the first may build the image
        the others copy). Raises SandboxError when none does."""
        why: list[str] = []
        for engine in self.engines:
            failure = await self._try_join(engine)
            if failure:
                why.append(f"{engine.name}: {failure}")
        if not self.up_engines():
            raise SandboxError("no docker engine can run a turn (" + "; ".join(why) + ")")
        self._health = asyncio.create_task(self._watch(), name="docker engine health")

    async def close(self) -> None:
        for task in [self._health, *self._joining.values()]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # -- placement ---------------------------------------------------------------------------

    def place(self) -> Engine:
        """Reserve a turn on the least loaded engine that is up and under its cap (release
        the reservation with `started` or `unreserve`)."""
        up = self.up_engines()
        if not up:
            raise SandboxError("no docker engine is up: " + ", ".join(e.name for e in self.engines))
        free = [e for e in up if self.admits(e)]
        if not free:
            raise SandboxError(
                f"every docker engine runs its maximum of {self.max_turns} turns"
                " (UHP_DOCKER_HOST_MAX_TURNS)"
            )
        engine = min(free, key=lambda e: (e.load, self.engines.index(e)))
        engine.reserved += 1
        return engine

    def admits(self, engine: Engine) -> bool:
        """Whether `engine` is up and under its cap."""
        return engine.up and (not self.max_turns or engine.load < self.max_turns)

    def unreserve(self, engine: Engine) -> None:
        engine.reserved -= 1

    def started(self, engine: Engine, turn: TurnOnEngine) -> None:
        engine.reserved -= 1
        engine.turns.add(turn)

    def ended(self, engine: Engine, turn: TurnOnEngine) -> None:
        engine.turns.discard(turn)

    # -- health ------------------------------------------------------------------------------

    def lost(self, engine: Engine, error: object = None) -> None:
        """Take `engine` out of rotation and end the turns on it (idempotent)."""
        if not engine.up:
            return
        engine.up = False
        engine.failed_probes = 0
        engine.next_probe = time.monotonic() + BACKOFF_FIRST_SECONDS
        log.warning("docker_engine_lost", extra={"engine": engine.name, "error": str(error)})
        for turn in list(engine.turns):
            turn.engine_lost(lost_reason(engine))
        engine.turns.clear()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(LOOP_TICK_SECONDS)
            now = time.monotonic()
            for engine in self.engines:
                if engine.next_probe > now:
                    continue
                if engine.up:
                    await self._ping(engine)
                elif engine not in self._joining:
                    task = asyncio.create_task(self._try_join(engine))
                    self._joining[engine] = task

                    def forget(_: object, e: Engine = engine) -> None:
                        self._joining.pop(e, None)

                    task.add_done_callback(forget)

    async def _ping(self, engine: Engine) -> None:
        engine.next_probe = time.monotonic() + HEALTH_INTERVAL_SECONDS
        try:
            await asyncio.wait_for(asyncio.to_thread(engine.api.ping), PROBE_TIMEOUT_SECONDS)
        except Exception as exc:
            self.lost(engine, exc)

    async def _try_join(self, engine: Engine) -> str | None:
        """Join `engine` when it answers; else schedule its next probe. Returns why not."""
        try:
            await asyncio.to_thread(self._join, engine)
        except Exception as exc:
            engine.failed_probes += 1
            pause = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2**engine.failed_probes)
            engine.next_probe = time.monotonic() + pause
            if engine.failed_probes == 1:
                log.warning("docker_engine_down", extra={"engine": engine.name, "error": str(exc)})
            return f"{type(exc).__name__}: {exc}"
        engine.up = True
        engine.failed_probes = 0
        engine.next_probe = time.monotonic() + HEALTH_INTERVAL_SECONDS
        log.info("docker_engine_joined", extra={"engine": engine.name})
        return None
