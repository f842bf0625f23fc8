"""The docker sandbox: one hardened, network-less container per turn.

A turn's container mounts the session's workspace and agent home read-write, the pinned
CLIs read-only and the gateway's socket folder read-only, and nothing else of the host. It
runs as a non-root uid with every capability dropped, no-new-privileges, a read-only root
with a small /tmp, and pids/memory/CPU limits; it has no network but loopback, where a relay
reaches the model gateway's Unix socket. README, "Docker sandbox", says why per turn (not
per session) and why no network (not an internal Docker network).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import docker.errors

from harness_bases.base import Invocation
from uhp_server.gateway.paths import gateway_path
from uhp_server.sandbox.base import Sandbox, SandboxedProcess, SandboxError, SessionMounts
from uhp_server.sandbox.docker import images, reaper
from uhp_server.sandbox.docker.container import (
    GATEWAY_PORT,
    LABEL_SERVER,
    HostMounts,
    Limits,
    create_kwargs,
    host_config_kwargs,
    resolve_user,
)
from uhp_server.sandbox.docker.gateway_socket import ASGIApp, GatewaySocket, socket_dir
from uhp_server.sandbox.docker.host_paths import HostPaths
from uhp_server.sandbox.docker.ownership import hand_over
from uhp_server.sandbox.docker.process import DockerProcess, attach_socket, wait_for_exit

log = logging.getLogger(__name__)


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
    ) -> None:
        self.data_dir = data_dir
        self.packages = packages  # what the enabled bases need in the runtime image
        self.image = image or images.runtime_tag(packages)
        self.base_image = base_image
        self.user = resolve_user(user)
        # The engine refuses a CPU limit above the host's cores: a default of 2 must still
        # work on a one-core machine.
        self.limits = replace(limits, cpus=min(limits.cpus, float(os.cpu_count() or 1)))
        self.gateway = GatewaySocket(socket_dir(data_dir))
        self.owner = ""  # this server's id, labelled on every container (set by open)
        self._api: Any = None
        self._host_paths = HostPaths()

    def gateway_url(self, backend: str) -> str:
        return f"http://127.0.0.1:{GATEWAY_PORT}{gateway_path(backend)}"

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self, gateway_app: ASGIApp) -> None:
        """Connect to the engine, remove what a previous run left, make sure the image exists,
        and serve the gateway's socket. Raises (and the server does not start) when any of
        that fails: a docker server that cannot run a turn must say so at once."""
        self._api = await asyncio.to_thread(engine_client)
        self._host_paths = await asyncio.to_thread(HostPaths.detect, self._api)
        self.owner = await asyncio.to_thread(reaper.server_id, self.data_dir)
        await asyncio.to_thread(reaper.reap, self._api, self.owner)
        await asyncio.to_thread(self._ensure_image)
        await self.gateway.open(gateway_app)
        log.info("docker_sandbox_ready", extra={"image": self.image, "server": self.owner})

    async def close(self) -> None:
        await self.gateway.close()
        if self._api is not None:
            with contextlib.suppress(docker.errors.DockerException):
                await asyncio.to_thread(reaper.reap, self._api, self.owner)

    def _ensure_image(self) -> None:
        if self.image == images.runtime_tag(self.packages):
            images.build_runtime(
                self._api,
                base_image=self.base_image,
                packages=self.packages,
                say=lambda text: log.info(text),
            )
        elif images.image_labels(self._api, self.image) is None:
            self._api.pull(self.image)

    # -- one turn ----------------------------------------------------------------------------

    async def start(self, invocation: Invocation, mounts: SessionMounts) -> SandboxedProcess:
        if self._api is None:
            raise SandboxError("the docker sandbox is not open")
        for folder in (mounts.workspace, mounts.home):
            folder.mkdir(parents=True, exist_ok=True)
        self._check(invocation, mounts)
        await asyncio.to_thread(hand_over, *self.user, mounts.workspace, mounts.home)
        kwargs = self._container(invocation, mounts)
        try:
            created = await asyncio.to_thread(self._api.create_container, **kwargs)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot create the agent container: {exc}") from exc
        container_id = created["Id"]
        try:
            sock = await asyncio.to_thread(attach_socket, self._api, container_id)
            exited = wait_for_exit(self._api, container_id, asyncio.get_running_loop())
            await asyncio.to_thread(self._api.start, container_id)
            return await DockerProcess.connect(self._api, container_id, sock, exited)
        except BaseException as exc:  # cancelled or failed while starting: leave nothing
            await asyncio.shield(asyncio.to_thread(self._remove, container_id))
            if isinstance(exc, docker.errors.DockerException):
                raise SandboxError(f"cannot start the agent container: {exc}") from exc
            raise

    def _container(self, invocation: Invocation, mounts: SessionMounts) -> dict[str, Any]:
        host = HostMounts(
            workspace=self._host_paths(mounts.workspace),
            home=self._host_paths(mounts.home),
            tools=self._host_paths(mounts.tools),
            gateway_dir=self._host_paths(self.gateway.folder),
            resolv_conf=self._host_paths(self.gateway.resolv_conf),
        )
        host_config = self._api.create_host_config(
            **host_config_kwargs(host, self.paths, self.limits)
        )
        labels = {**mounts.labels, LABEL_SERVER: self.owner}
        return create_kwargs(
            image=self.image,
            invocation=invocation,
            user=self.user,
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

    def _remove(self, container_id: str) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self._api.remove_container(container_id, force=True)
