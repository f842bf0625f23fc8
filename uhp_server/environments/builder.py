"""The seam between a build's bookkeeping (versions, records, busy) and the build itself,
which runs in the sandbox toolchain sessions run in (Environments §4).

The chapter snapshots the source into the version's folder, then asks a Builder to install
what the manifests declare there; the builder reports each step as it ends (BuildProgress)
and answers what it installed, or raises BuildFailed with the reason. The version's folder
is the builder's to write until it answers; then the chapter makes it read-only."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Declared:
    """What the owner declared beside the manifests, as spec strings per manager."""

    pip: tuple[str, ...] = ()
    npm: tuple[str, ...] = ()
    apt: tuple[str, ...] = ()


@dataclass(frozen=True)
class Package:
    manager: str  # pip, npm, apt
    name: str
    version: str


@dataclass(frozen=True)
class BuildRequest:
    environment_id: str
    principal_id: str
    agent_number: int | None  # the principal's (sandbox/agent_user.py): the build runs as it
    version: int
    folder: Path  # the version's folder, the source already in it; the build writes here
    mount: str  # where the build (and every session) sees `folder`: /env/<slug>
    declared: Declared = field(default_factory=Declared)
    python: str = ""  # runtime.python: the interpreter for the virtual environment; "": default


@dataclass(frozen=True)
class BuildResult:
    packages: tuple[Package, ...]
    log: str  # the installers' whole output


class BuildFailed(Exception):
    """The build did not finish: `reason` in words, `log` the output so far."""

    def __init__(self, reason: str, log: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.log = log


class BuildProgress(Protocol):
    async def step(self, stage: str, log: str) -> None:
        """The step now running (`copying files`, `python packages`, `node packages`,
        `system packages`, `setup.sh`, `finishing`) and the log so far."""


@dataclass(frozen=True)
class Runtimes:
    """What builds can use here (GET /v1/environments/runtimes)."""

    python: tuple[str, ...]  # Python minors, "3.11"
    node: str  # Node's major, "20"; "" when there is none
    os: str  # "Debian GNU/Linux 12 (bookworm)"


class Builder(Protocol):
    async def build(self, request: BuildRequest, progress: BuildProgress) -> BuildResult: ...

    def runtimes(self) -> Runtimes: ...
