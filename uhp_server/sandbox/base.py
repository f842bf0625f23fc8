"""The sandbox interface: start a base's Invocation with the session's folders mounted."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from harness_bases.base import Invocation, SandboxPaths


@dataclass(frozen=True)
class SessionMounts:
    """Host folders of one session. workspace and home are read-write; tools is read-only."""

    workspace: Path
    home: Path
    tools: Path


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


class Sandbox(abc.ABC):
    name: str
    paths: SandboxPaths = SandboxPaths()

    @abc.abstractmethod
    def gateway_url(self, backend: str) -> str:
        """The model gateway's base URL for `backend`, as reached from inside the sandbox."""

    @abc.abstractmethod
    async def start(self, invocation: Invocation, mounts: SessionMounts) -> SandboxedProcess:
        """Start the invocation with mounts at self.paths. Raises SandboxError on failure."""


class SandboxError(RuntimeError):
    """The sandbox could not start the process (detail is for logs, never for clients)."""
