"""The sandbox interface: start a base's Invocation with the session's folders mounted.

Each sandbox is one folder beside this module (local/, docker/) and registers its Sandbox
subclass in the `uhp_server.sandboxes` entry points under the name UHP_SANDBOX chooses it by
(registry.py); what several sandboxes share (limits, cgroups, egress, the gateway door,
spawning, handing folders over) lives here, one module each.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from harness_bases.base import HarnessBase, Invocation, SandboxPaths
from uhp_server.sandbox.agent_user import AgentUsers

if TYPE_CHECKING:
    from uhp_server.settings import Settings


@dataclass(frozen=True)
class ExtraMount:
    """A host folder a sandbox shows at `target`, an absolute path of its own (an
    environment's version at /env/<slug>). Read-only unless `writable`: the kernel refuses
    a write, a chmod or a rename in it, in every sandbox, not a convention."""

    source: Path
    target: str
    writable: bool = False


@dataclass(frozen=True)
class RunLimits:
    """Limits one start asks for in place of the sandbox's per-turn ones (an environment's
    build: UHP_ENVIRONMENT_BUILD_*), and what its limit messages call it ("build").
    0 keeps that limit as the sandbox's own."""

    memory_bytes: int = 0
    disk_bytes: int = 0
    subject: str = "turn"


@dataclass(frozen=True)
class SessionMounts:
    """Host folders of one session. workspace and home are read-write; tools is read-only."""

    workspace: Path
    home: Path
    tools: Path
    # What the sandbox runs for (uhp.session, uhp.response, uhp.base), for operators: the
    # docker sandbox labels its containers with them.
    labels: Mapping[str, str] = field(default_factory=dict)
    # The gateway door this turn's token is bound to (Sandbox.door); None: the sandbox
    # makes up its own, which no token is bound to.
    door: str | None = None
    # The turn's principal's agent number (storage/keys.py agent_number): under a root
    # server its agent runs as a uid of its own (agent_user.py). None: the sandbox's default.
    agent_number: int | None = None
    # Further folders, each at its own path (an environment's, Environments §6).
    extra: tuple[ExtraMount, ...] = ()
    # Limits of this start in place of the sandbox's own; None: the sandbox's per-turn ones.
    # The disk a sandbox watches counts the writable `extra` folders too.
    limits: RunLimits | None = None


class SandboxedProcess(abc.ABC):
    """A process running in a sandbox. Implements harness_bases.base.Process."""

    @abc.abstractmethod
    async def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    async def close_stdin(self) -> None: ...

    @abc.abstractmethod
    def lines(self) -> AsyncIterator[bytes]: ...

    @abc.abstractmethod
    def stderr_tail(self) -> str: ...

    @abc.abstractmethod
    async def wait(self) -> int:
        """Wait for the process to exit; returns its exit code."""

    @abc.abstractmethod
    async def kill(self) -> None:
        """Kill the process and everything it started. Idempotent."""

    async def pause(self) -> bool:
        """Stop every process of the sandbox from running until resume() (a warm process
        idling between its session's turns, engine/turns/warm.py: it must take no CPU
        outside admission); False, nothing paused, where the sandbox cannot."""
        return False

    async def resume(self) -> None:
        """Let a paused sandbox run again (idempotent; nothing when it was not paused)."""
        return None

    async def limit_exceeded(self) -> str | None:
        """Why the sandbox stopped (or must stop) the process, for a resource limit or
        because what ran it was lost (e.g. its Docker engine), as a sentence for the turn's
        error message; None while every limit held."""
        return None


class Sandbox(abc.ABC):
    name: str  # the UHP_SANDBOX value, and the name of its entry point
    paths: SandboxPaths = SandboxPaths()

    @classmethod
    @abc.abstractmethod
    def from_settings(cls, settings: Settings, bases: Collection[HarnessBase] = ()) -> Self:
        """The sandbox the server runs turns in, built from its settings (read what is
        yours; leave the others). `bases`: the enabled bases, for a sandbox that prepares
        something for them (the docker one builds their runtime packages into its image).
        It connects to nothing yet: open() is where a sandbox reaches what it runs on,
        checks what it needs and raises."""

    # Who its agents run as; None: a sandbox that does not choose (its agents' uid is its own).
    users: AgentUsers | None = None
    # Whether a finished turn's process may stay alive for its session's next turn
    # (engine/turns/warm.py): only where that was tested to keep every guarantee of the
    # sandbox (its gateway door, its mounts, its end on cancel); elsewhere every turn is cold.
    keeps_processes_warm: bool = False

    @property
    def per_principal_users(self) -> bool:
        """True when each principal's agents run as a uid of their own (agent_user.py): the
        engine then gives every turn its principal's agent number (SessionMounts)."""
        return self.users is not None and self.users.per_principal

    @abc.abstractmethod
    def gateway_url(self, backend: str) -> str:
        """The model gateway's base URL for `backend`, as reached from inside the sandbox."""

    def door(self, turn_id: str) -> str | None:
        """The name of the gateway door turn `turn_id` reaches the gateway through; its
        token is bound to it (None: the server's TCP port)."""
        return None

    @abc.abstractmethod
    async def start(self, invocation: Invocation, mounts: SessionMounts) -> SandboxedProcess:
        """Start the invocation with mounts at self.paths. Raises SandboxError on failure."""

    async def open(self, gateway_app: Any) -> None:  # noqa: B027 (optional hook)
        """Called once as the server starts, with the ASGI app that serves the model gateway
        (a sandbox that cannot reach the server's port serves it its own way). Raises when
        the sandbox cannot work, so the server does not start half-able."""

    async def close(self) -> None:  # noqa: B027 (optional hook)
        """Called once as the server stops, after every turn was stopped."""

    async def reap_owner(self, owner: str) -> None:  # noqa: B027 (optional hook)
        """Remove whatever another server (a replica whose lease expired) left running here.
        A sandbox whose processes die with their server (local) has nothing to do."""

    def host_path(self, path: str, mounts: SessionMounts) -> Path | None:
        """The host path behind a sandbox path inside one of the mounts, else None (lets a
        sandbox check an invocation's program and cwd before starting it)."""
        for inside, host in (
            (self.paths.workspace, mounts.workspace),
            (self.paths.home, mounts.home),
            (self.paths.tools, mounts.tools),
        ):
            if path == inside or path.startswith(inside + "/"):
                return host / path[len(inside) :].lstrip("/")
        return None


class SandboxError(RuntimeError):
    """The sandbox could not start the process (detail is for logs, never for clients)."""
