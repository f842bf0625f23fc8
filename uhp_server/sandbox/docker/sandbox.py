"""The docker sandbox: one hardened, network-less container per turn.

A turn's container mounts the session's workspace and agent home read-write, the pinned
CLIs read-only and the gateway's socket folder read-only, and nothing else of the host. It
runs as a non-root uid with every capability dropped, no-new-privileges, a read-only root
with a small /tmp, and pids/memory/CPU limits; it has no network but loopback, where a relay
reaches the model gateway's Unix socket. README, "Docker sandbox", says why per turn (not
per session) and why no network (not an internal Docker network).

The turns spread over the engines of UHP_DOCKER_HOSTS (engines.py). Every engine must run on
this host (or see its data folder and socket folder at the same paths): a container mounts
the session's folders and the gateway's socket by host path. When every engine shares the
server's mount namespace and the server can mount, a container mounts per-turn overlays of
the session's folders instead, and the socket folder is a tmpfs of its own, so its mount
table shows neither the data folder's path nor the session id (sandbox/neutral_mounts.py).
There, too, a small pool of containers started ahead serves turns that fit (ready_pool.py):
a turn then skips the engine's create and start.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import secrets
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from harness_bases import compile_cache
from harness_bases.base import HarnessBase, Invocation
from uhp_server.gateway.paths import gateway_path
from uhp_server.sandbox import neutral_mounts
from uhp_server.sandbox.agent_user import DEFAULT_UID_RANGE, AgentUsers, account_files
from uhp_server.sandbox.base import Sandbox, SandboxedProcess, SandboxError, SessionMounts
from uhp_server.sandbox.docker import images, reaper, slot_launch
from uhp_server.sandbox.docker.container import (
    GATEWAY_PORT,
    LABEL_RESPONSE,
    LABEL_SERVER,
    LABEL_SLOT,
    SLOT_NAME_PREFIX,
    HostMounts,
    Limits,
    create_kwargs,
    host_config_kwargs,
)
from uhp_server.sandbox.docker.engines import (
    Engine,
    EnginePool,
    lost_reason,
    parse_hosts,
    unreachable,
)
from uhp_server.sandbox.docker.gateway_socket import (
    ASGIApp,
    GatewaySocket,
    TurnSocket,
    socket_dir,
)
from uhp_server.sandbox.docker.host_paths import HostPaths
from uhp_server.sandbox.docker.process import DockerProcess, attach_socket, wait_for_exit
from uhp_server.sandbox.docker.ready_pool import ReadyPool, Slot, User
from uhp_server.sandbox.docker.runtimes import GVISOR, check_limits, check_runtime
from uhp_server.sandbox.docker.slot_mounts import NAMES, SlotMounts
from uhp_server.sandbox.egress import EgressPolicy, with_proxy
from uhp_server.sandbox.gateway_door import wound_down
from uhp_server.sandbox.neutral_mounts import (
    NeutralMounts,
    TurnMounts,
    mount_session,
    mounted_off_loop,
)
from uhp_server.sandbox.ownership import hand_over
from uhp_server.settings import Settings

log = logging.getLogger(__name__)

# What an engine call raises: a refusal, or no answer (the SDK lets requests' errors through).
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


def engine_client() -> Any:
    """The low-level SDK client for the engine named by DOCKER_HOST (default: local socket)."""
    return docker.from_env(timeout=60).api


class DockerSandbox(Sandbox):
    name = "docker"

    def __init__(
        self,
        data_dir: Path,
        *,
        image: str = "",
        packages: tuple[str, ...] = (),
        base_image: str = "debian:bookworm-slim",
        user: str = "auto",
        limits: Limits = Limits(),  # noqa: B008 (frozen, shared safely)
        egress: EgressPolicy = EgressPolicy(),  # noqa: B008 (frozen, shared safely)
        hosts: str = "",
        host_max_turns: int = 0,
        owner: str = "",
        runtime: str = "",
        uid_range: str = DEFAULT_UID_RANGE,
        ready_pool: int = 0,
    ) -> None:
        """`owner`: the id labelled on this server's containers (UHP_REPLICA_ID); empty, the
        id kept in the data directory. `runtime`: the engines' runtime for the containers
        (runtimes.py; empty: each engine's default). `ready_pool`: ready containers per
        engine and agent uid (ready_pool.py; 0: none)."""
        self.data_dir = data_dir
        self.packages = packages  # what the enabled bases need in the runtime image
        self.image = image or images.runtime_tag(packages)
        self.base_image = base_image
        self.users: AgentUsers = AgentUsers.from_settings(user, "UHP_DOCKER_USER", uid_range)
        self.user = self.users.default  # a turn's own: users.for_principal
        # The engine refuses a CPU limit above the host's cores: a default of 2 must still
        # work on a one-core machine.
        self.limits = replace(limits, cpus=min(limits.cpus, float(os.cpu_count() or 1)))
        self.egress = egress
        check_limits(runtime, limits.pids)
        self.runtime = runtime
        self.gateway = GatewaySocket(socket_dir(data_dir), egress)
        self.owner = owner  # this server's id, labelled on every container (set by open)
        self.engines = EnginePool(parse_hosts(hosts), host_max_turns, self._join)
        self._opened = False
        self._closing: set[asyncio.Future[None]] = set()
        self._neutral: NeutralMounts | None = None  # set by open(), when the server can
        self.ready_pool_size = ready_pool
        self.pool: ReadyPool | None = None  # set by open(), when turns can use one
        self._slot_mounts: SlotMounts | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, bases: Collection[HarnessBase] = ()
    ) -> DockerSandbox:
        """Its UHP_DOCKER_* and UHP_EGRESS_* settings; the runtime image carries what the
        enabled `bases` need (their runtime_packages, part of the image's tag)."""
        limits = Limits(
            memory=settings.docker_memory,
            cpus=settings.docker_cpus,
            pids=settings.docker_pids_limit,
            tmp_size=settings.docker_tmp_size,
        )
        return cls(
            settings.data_dir,
            image=settings.docker_image,
            packages=images.runtime_packages(bases),
            base_image=settings.docker_base_image,
            user=settings.docker_user,
            uid_range=settings.agent_uid_range,
            limits=limits,
            hosts=settings.docker_hosts,
            host_max_turns=settings.docker_host_max_turns,
            owner=settings.replica_id or "",
            runtime=settings.docker_runtime,
            ready_pool=settings.docker_ready_pool,
            egress=EgressPolicy.from_settings(
                settings.egress_allow_hosts, settings.egress_allow_private_hosts
            ),
        )

    def gateway_url(self, backend: str) -> str:
        return f"http://127.0.0.1:{GATEWAY_PORT}{gateway_path(backend)}"

    def door(self, turn_id: str) -> str | None:
        return f"docker:{turn_id}"

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self, gateway_app: ASGIApp) -> None:
        """Join the engines (each: connect, remove what a previous run left, make sure the
        image exists) and serve the gateway's socket. Raises (and the server does not start)
        when no engine can run a turn: a docker server that cannot must say so at once. An
        engine that does not answer yet joins when it does."""
        self.owner = self.owner or await asyncio.to_thread(reaper.server_id, self.data_dir)
        await self.engines.open()
        self._neutral = await asyncio.to_thread(self._open_neutral_mounts)
        await self.gateway.open(gateway_app)
        self._open_pool()
        self._opened = True
        log.info(
            "docker_sandbox_ready",
            extra={
                "image": self.image,
                "server": self.owner,
                "runtime": self.runtime or "default",
                "ready_pool": self.pool.size if self.pool else 0,
            },
        )

    def _open_pool(self) -> None:
        """The ready pool, where a slot's container can be given its turn's folders after
        it started: mounts propagate into it (not in gVisor, whose Sentry sees none after
        start), and the turn's folders are overlays (neutral mounts). Egress relays start
        with the container, before the turn's proxy exists: no pool with egress either."""
        if self.ready_pool_size <= 0:
            return
        why = ""
        if self._neutral is None:
            why = "no neutral mounts (the server cannot mount, or an engine is elsewhere)"
        elif self.runtime == GVISOR:
            why = "gVisor does not see mounts made after a container started"
        elif self.egress.enabled:
            why = "egress is allowed: its relay starts with the container"
        else:
            try:
                self._slot_mounts = SlotMounts.open(self.owner)
            except OSError as exc:
                why = f"cannot mount the slots' shared folder: {exc}"
        if why:
            log.warning("docker_ready_pool_off", extra={"reason": why})
            return
        self.pool = ReadyPool(self.ready_pool_size, self.engines, self._make_slot, self._drop_slot)
        if not self.users.per_principal:
            self.pool.want(self.users.default)  # every turn's uid: filled at once

    def _open_neutral_mounts(self) -> NeutralMounts | None:
        """Neutral mounts (and the socket folder on a tmpfs of its own) when every engine
        sees the server's mounts; else the session's folders are bound as they are."""
        if not all(engine.shares_our_mounts() for engine in self.engines.engines):
            log.warning(
                "sandbox_mount_table_shows_host_paths",
                extra={"reason": "a docker engine does not share the server's mount namespace"},
            )
            return None
        neutral = NeutralMounts.detect(self.data_dir, self.owner)
        if neutral is not None:
            try:
                neutral_mounts.mount_tmpfs(self.gateway.folder)
            except OSError as exc:
                log.warning("sandbox_mount_table_shows_host_paths", extra={"reason": str(exc)})
                return None
        return neutral

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        await self.engines.close()
        await self.gateway.close()
        if self._neutral is not None:
            await asyncio.to_thread(neutral_mounts.unmount, self.gateway.folder)
        if self._slot_mounts is not None:
            await asyncio.to_thread(self._slot_mounts.close)
        await wound_down()
        for engine in self.engines.up_engines():
            with contextlib.suppress(docker.errors.DockerException, OSError):
                await asyncio.to_thread(reaper.reap, engine.api, self.owner)

    async def reap_owner(self, owner: str) -> None:
        """Remove every container of another server (a replica whose lease expired)."""
        for engine in self.engines.up_engines():
            with contextlib.suppress(docker.errors.DockerException, OSError):
                await asyncio.to_thread(reaper.reap, engine.api, owner)

    def _join(self, engine: Engine) -> None:
        """Ready an engine that answers (on a thread): connect, reap this server's leftovers,
        make the image present."""
        api = engine.connect()
        check_runtime(api, self.runtime, engine.name)
        engine.host_paths = HostPaths.detect(api)
        reaper.reap(api, self.owner)
        self._ensure_image(api, engine.name)
        engine.api = api

    def _ensure_image(self, api: Any, name: str) -> None:
        runtime = self.image == images.runtime_tag(self.packages)
        if runtime and images.is_current(api, self.image, packages=self.packages):
            return
        if not runtime and images.image_labels(api, self.image) is not None:
            return
        # No registry needed between engines: copy the image from one that has it.
        for peer in self.engines.up_engines():
            if images.image_labels(peer.api, self.image) is not None:
                log.info("docker_image_copy", extra={"image": self.image, "engine": name})
                images.copy_image(peer.api, api, self.image)
                return
        if runtime:
            images.build_runtime(
                api,
                base_image=self.base_image,
                packages=self.packages,
                say=lambda text: log.info(text),
            )
        else:
            api.pull(self.image)

    # -- one turn ----------------------------------------------------------------------------

    async def start(self, invocation: Invocation, mounts: SessionMounts) -> SandboxedProcess:
        if not self._opened:
            raise SandboxError("the docker sandbox is not open")
        for folder in (mounts.workspace, mounts.home):
            folder.mkdir(parents=True, exist_ok=True)
        self._check(invocation, mounts)
        try:
            user = self.users.for_principal(mounts.agent_number)
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        await asyncio.to_thread(_hand_over, user, mounts)
        door = mounts.door or f"docker:unbound-{secrets.token_hex(8)}"
        neutral = await mounted_off_loop(functools.partial(self._mount_neutral, mounts))
        try:  # the overlays never outlive a start that failed, whatever failed
            go = self._pooled_go(invocation, mounts, neutral)
            process = None
            if go is not None and neutral is not None:
                process = await self._start_pooled(go, door, user, mounts, neutral)
        except BaseException:
            if neutral is not None:
                await asyncio.shield(asyncio.to_thread(neutral.unmount))
            raise
        if process is not None:
            return process
        try:
            accounts = account_files(user, self.paths.home)
            turn_socket = await self.gateway.open_turn(door, user, accounts)
        except BaseException as exc:
            if neutral is not None:
                await asyncio.shield(asyncio.to_thread(neutral.unmount))
            if isinstance(exc, OSError):
                raise SandboxError(f"cannot open the turn's gateway socket: {exc}") from exc
            raise
        try:
            engine, process = await self._place(invocation, mounts, turn_socket, neutral)
        except BaseException:
            await asyncio.shield(self.gateway.close_turn(turn_socket))
            if neutral is not None:
                neutral.unmount()
            raise

        self._when_exited(engine, process, turn_socket, neutral)
        return process

    def _when_exited(
        self,
        engine: Engine,
        process: DockerProcess,
        turn_socket: TurnSocket,
        neutral: TurnMounts | None,
        slot: Slot | None = None,
    ) -> None:
        def exited(_: object) -> None:
            # At once, before the turn's wait() returns: the server may then write the
            # folders itself (a layer must not change under a mounted overlay).
            if slot is not None and self._slot_mounts is not None:
                self._slot_mounts.remove_slot(slot.points)
            if neutral is not None:
                neutral.unmount()
            self.engines.ended(engine, process)
            # The socket goes with the container: a token copied out has no door left.
            self._closing.add(asyncio.ensure_future(self._close(turn_socket)))

        process.exited.add_done_callback(exited)

    # -- the ready pool ------------------------------------------------------------------------

    def _pooled_go(
        self, invocation: Invocation, mounts: SessionMounts, neutral: TurnMounts | None
    ) -> bytes | None:
        """What a ready slot's shell is sent to become this turn's CLI; None when the turn
        must create its own container: no pool, no overlays to mount into the slot, or
        something a slot fixed at its create differs (extra folders, a memory limit)."""
        if self.pool is None or neutral is None or mounts.extra:
            return None
        if mounts.limits is not None and mounts.limits.memory_bytes:
            return None
        script = slot_launch.turn_script(
            replace(invocation, env=with_proxy(invocation.env, self.egress))
        )
        return slot_launch.go_message(script) if script is not None else None

    async def _start_pooled(
        self, go: bytes, door: str, user: User, mounts: SessionMounts, neutral: TurnMounts
    ) -> DockerProcess | None:
        """The turn in a ready slot on the engine it is placed on (as a cold turn would be),
        or None: no slot of its uid is ready there."""
        assert self.pool is not None
        engine = self.engines.place()
        slot = self.pool.take(engine, user)
        if slot is None:
            self.engines.unreserve(engine)
            return None
        process = await self._start_in_slot(slot, go, door, user, neutral)
        self._name_after_turn(slot, mounts)
        return process

    def _name_after_turn(self, slot: Slot, mounts: SessionMounts) -> None:
        """Name the slot's container after its response (`uhp-<response id>`), off the
        turn's path: made before its turn was known, it carries no uhp.response label, and
        an operator reading `docker ps` should still see what it runs."""
        response = mounts.labels.get(LABEL_RESPONSE, "")
        if not response:
            return
        name = "uhp-" + re.sub(r"[^a-zA-Z0-9_.-]", "-", response)

        async def rename() -> None:
            with contextlib.suppress(*ENGINE_ERRORS):
                await asyncio.to_thread(slot.engine.api.rename, slot.container_id, name)
            self._closing.discard(asyncio.current_task())

        self._closing.add(asyncio.ensure_future(rename()))

    async def _start_in_slot(
        self, slot: Slot, go: bytes, door: str, user: User, neutral: TurnMounts
    ) -> DockerProcess:
        """Bind the turn to a ready slot (its engine reserved): the turn's overlays mounted
        on the slot's folders, its gateway socket served in the slot's folder, then the
        script on stdin."""
        assert self._slot_mounts is not None
        engine = slot.engine
        sources = {name: neutral.paths[name] for name in NAMES}
        turn_socket: TurnSocket | None = None
        try:
            await asyncio.to_thread(self._slot_mounts.bind, slot.points, sources)
            accounts = account_files(user, self.paths.home)
            turn_socket = await self.gateway.open_turn(door, user, accounts, prepared=slot.name)
            process = await DockerProcess.connect(
                engine.api, slot.container_id, slot.sock, slot.exited
            )
            await process.write(go)
        except BaseException as exc:
            self.engines.unreserve(engine)
            await asyncio.shield(self._drop_slot(slot, turn_socket))
            if isinstance(exc, OSError):
                raise SandboxError(f"cannot start the turn in a ready container: {exc}") from exc
            raise
        self.engines.started(engine, process)
        if not engine.up:  # lost while the turn was bound
            process.engine_lost(lost_reason(engine))
        log.debug("docker_ready_slot_bound", extra={"slot": slot.name, "door": door})
        self._when_exited(engine, process, turn_socket, neutral, slot)
        return process

    async def _make_slot(self, engine: Engine, user: User) -> Slot:
        """Start one ready slot of `user` on `engine` (ready_pool.py); leaves nothing behind
        when it fails or is cancelled."""
        assert self._slot_mounts is not None
        slot_mounts = self._slot_mounts
        name = secrets.token_hex(8)
        points = await asyncio.to_thread(slot_mounts.make_slot, name)
        try:
            files = await asyncio.to_thread(
                self.gateway.prepare_folder, name, user, account_files(user, self.paths.home)
            )
            kwargs = self._slot_container(engine, name, points, files, user)
            api = engine.api
            created = await asyncio.to_thread(api.create_container, **kwargs)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(self._remove_slot_folders, name, points))
            raise
        container_id = created["Id"]
        try:
            sock = await asyncio.to_thread(attach_socket, api, container_id)
            exited = wait_for_exit(api, container_id, asyncio.get_running_loop())
            await asyncio.to_thread(api.start, container_id)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(self._remove, api, container_id))
            await asyncio.shield(asyncio.to_thread(self._remove_slot_folders, name, points))
            raise
        return Slot(name, engine, user, container_id, sock, exited, points)

    def _slot_container(
        self,
        engine: Engine,
        name: str,
        points: dict[str, Path],
        files: dict[str, Path],
        user: User,
    ) -> dict[str, Any]:
        """A slot's container: the turn's container but for what only the turn knows (its
        folders come later, through `points`; its invocation on stdin; no session labels)."""
        host_path = engine.host_paths
        host = HostMounts(
            workspace=host_path(points["workspace"]),
            home=host_path(points["home"]),
            tools=host_path(points["tools"]),
            gateway_dir=host_path(self.gateway.folder / name),
            resolv_conf=host_path(self.gateway.resolv_conf),
            files={host_path(here): inside for inside, here in files.items()},
            follow_mounts=True,
        )
        host_config = engine.api.create_host_config(
            **host_config_kwargs(host, self.paths, self.limits, self.runtime)
        )
        kwargs = create_kwargs(
            image=self.image,
            invocation=Invocation(list(slot_launch.COMMAND), {}, "/"),
            user=user,
            labels={LABEL_SERVER: self.owner, LABEL_SLOT: name},
            host_config=host_config,
        )
        return {**kwargs, "name": SLOT_NAME_PREFIX + name}

    async def _drop_slot(self, slot: Slot, turn_socket: TurnSocket | None = None) -> None:
        """Remove a slot that serves no turn (any more): its container, then its folders."""
        slot.sock.close()  # its shell reads end-of-file and exits
        with contextlib.suppress(*ENGINE_ERRORS):
            await asyncio.to_thread(self._remove, slot.engine.api, slot.container_id)
        if turn_socket is not None:
            await self.gateway.close_turn(turn_socket)
        await asyncio.to_thread(self._remove_slot_folders, slot.name, slot.points)

    def _remove_slot_folders(self, name: str, points: dict[str, Path]) -> None:
        if self._slot_mounts is not None:
            self._slot_mounts.remove_slot(points)
        self.gateway.remove_folder(name)

    def _mount_neutral(self, mounts: SessionMounts) -> TurnMounts | None:
        """The turn's overlays (neutral_mounts.mount_session), or None."""
        return mount_session(self._neutral, mounts)

    async def _place(
        self,
        invocation: Invocation,
        mounts: SessionMounts,
        turn_socket: TurnSocket,
        neutral: TurnMounts | None,
    ) -> tuple[Engine, DockerProcess]:
        """Run the turn on an engine with room; one that does not answer is taken out of
        rotation and the next one tried."""
        while True:
            engine = self.engines.place()
            try:
                process = await self._run(engine, invocation, mounts, turn_socket, neutral)
            except BaseException as exc:
                self.engines.unreserve(engine)
                cause = exc.__cause__ if isinstance(exc, SandboxError) else exc
                if cause is not None and unreachable(cause):
                    self.engines.lost(engine, cause)
                    continue  # place() raises once no engine is left
                raise
            self.engines.started(engine, process)
            if not engine.up:  # lost while the container started
                process.engine_lost(lost_reason(engine))
            return engine, process

    async def _close(self, turn_socket: TurnSocket) -> None:
        try:
            await self.gateway.close_turn(turn_socket)
        finally:
            self._closing.discard(asyncio.current_task())

    async def _run(
        self,
        engine: Engine,
        invocation: Invocation,
        mounts: SessionMounts,
        turn_socket: TurnSocket,
        neutral: TurnMounts | None,
    ) -> DockerProcess:
        api = engine.api
        kwargs = self._container(engine, invocation, mounts, turn_socket, neutral)
        try:
            created = await asyncio.to_thread(api.create_container, **kwargs)
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot create the agent container: {exc}") from exc
        container_id = created["Id"]
        loop = asyncio.get_running_loop()

        def wait_failed(error: BaseException) -> None:
            if unreachable(error):
                self.engines.lost(engine, error)

        try:
            sock = await asyncio.to_thread(attach_socket, api, container_id)
            exited = wait_for_exit(api, container_id, loop, wait_failed)
            await asyncio.to_thread(api.start, container_id)
            return await DockerProcess.connect(api, container_id, sock, exited)
        except BaseException as exc:  # cancelled or failed while starting: leave nothing
            await asyncio.shield(asyncio.to_thread(self._remove, api, container_id))
            if isinstance(exc, ENGINE_ERRORS):
                raise SandboxError(f"cannot start the agent container: {exc}") from exc
            raise

    def _container(
        self,
        engine: Engine,
        invocation: Invocation,
        mounts: SessionMounts,
        turn_socket: TurnSocket,
        neutral: TurnMounts | None = None,
    ) -> dict[str, Any]:
        host_path = engine.host_paths
        bound = neutral_mounts.bound(mounts, neutral)  # every engine sees the server's mounts
        host = HostMounts(
            workspace=host_path(bound.workspace),
            home=host_path(bound.home),
            tools=host_path(bound.tools),
            gateway_dir=host_path(turn_socket.folder),
            resolv_conf=host_path(self.gateway.resolv_conf),
            files={host_path(here): inside for inside, here in turn_socket.files.items()},
            extra=tuple(
                (host_path(extra.source), extra.target, extra.writable) for extra in bound.extra
            ),
        )
        limits = self.limits
        if mounts.limits is not None and mounts.limits.memory_bytes:
            limits = replace(limits, memory=str(mounts.limits.memory_bytes))
        host_config = engine.api.create_host_config(
            **host_config_kwargs(host, self.paths, limits, self.runtime)
        )
        labels = {**mounts.labels, LABEL_SERVER: self.owner}
        return create_kwargs(
            image=self.image,
            invocation=replace(invocation, env=with_proxy(invocation.env, self.egress)),
            user=self.users.for_principal(mounts.agent_number),
            labels=labels,
            host_config=host_config,
        )

    def _check(self, invocation: Invocation, mounts: SessionMounts) -> None:
        """A missing program or cwd would only show as the CLI exiting 127 after start."""
        if not invocation.argv:
            raise SandboxError("empty argv")
        if not mounts.tools.is_dir():
            raise SandboxError(f"tools folder missing: {mounts.tools}")
        program = self.host_path(invocation.argv[0], mounts)
        if program is not None and not program.is_file():
            raise SandboxError(f"program not found: {invocation.argv[0]}")
        cwd = self.host_path(invocation.cwd, mounts)
        if cwd is not None and not cwd.is_dir():
            raise SandboxError(f"working directory missing: {invocation.cwd}")

    @staticmethod
    def _remove(api: Any, container_id: str) -> None:
        # An engine that went away reaps the container when it is back.
        with contextlib.suppress(docker.errors.NotFound, requests.exceptions.ConnectionError):
            api.remove_container(container_id, force=True)


def _hand_over(user: tuple[int, int], mounts: SessionMounts) -> None:
    """The session's folders to the turn's user, and node's compile cache for it too
    (disk work: off the loop)."""
    hand_over(*user, mounts.workspace, mounts.home)
    compile_cache.for_user(mounts.tools, user[0])
