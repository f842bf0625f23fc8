"""The Environments chapter's records, as the facade answers them (engine/facade/
environments.py): read-only, copied from rows, with the object's derived status (§2)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage import environments as store
from storage.tables import EnvironmentRow, EnvironmentVersionRow
from uhp_server.environments.builder import Package
from uhp_server.environments.layout import mount_path
from uhp_server.environments.names import DeclaredSpec
from uhp_server.environments.source import Size

EMPTY, BUILDING, READY, FAILED = "empty", "building", "ready", "failed"


@dataclass(frozen=True)
class EnvironmentVersion:
    version: int
    status: str
    started_at: float
    finished_at: float | None
    error: str
    files: int
    bytes: int
    packages: int  # how many the build installed
    stage: str  # the step a running build is on
    collected: bool  # retention removed its folder: its record only


@dataclass(frozen=True)
class EnvironmentBuild:
    environment_id: str
    version: EnvironmentVersion
    log: str
    packages: tuple[Package, ...]


@dataclass(frozen=True)
class Environment:
    id: str
    name: str
    slug: str
    description: str
    entry: str
    status: str
    version: int | None  # the active one
    latest_version: int | None
    files: Size
    packages: tuple[Package, ...]  # what the active build installed
    declared: dict[str, list[DeclaredSpec]]
    runtime: dict[str, str]
    versions: tuple[EnvironmentVersion, ...]
    created_at_ms: int
    updated_at_ms: int

    @property
    def mount(self) -> str:
        return mount_path(self.slug)

    @property
    def build(self) -> EnvironmentVersion | None:
        """The latest build, or None before the first."""
        return self.versions[-1] if self.versions else None


@dataclass(frozen=True)
class NamingHarness:
    id: str
    name: str
    base: str


@dataclass(frozen=True)
class EnvironmentDeleted:
    id: str
    detached: tuple[NamingHarness, ...]  # harnesses that named it and keep the reference


@dataclass(frozen=True)
class SourceFile:
    path: Path
    size: int
    media_type: str


def status_of(row: EnvironmentRow, versions: list[EnvironmentVersionRow]) -> str:
    latest = versions[-1] if versions else None
    if latest is not None and latest.status == store.BUILDING:
        return BUILDING
    if row.active_version is not None:
        return READY
    if latest is not None and latest.status == store.FAILED:
        return FAILED
    return EMPTY


def version_of(row: EnvironmentVersionRow) -> EnvironmentVersion:
    return EnvironmentVersion(
        version=row.version,
        status=row.status,
        started_at=row.started_at,
        finished_at=row.finished_at,
        error=row.error,
        files=row.files,
        bytes=row.size_bytes,
        packages=len(row.packages or []),
        stage=row.stage,
        collected=row.collected_at is not None,
    )


def packages_of(stored: list[dict[str, Any]] | None) -> tuple[Package, ...]:
    return tuple(
        Package(str(p.get("manager", "")), str(p.get("name", "")), str(p.get("version", "")))
        for p in stored or []
    )


def build_of(row: EnvironmentVersionRow) -> EnvironmentBuild:
    return EnvironmentBuild(row.environment_id, version_of(row), row.log, packages_of(row.packages))
