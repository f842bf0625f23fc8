"""Where environments live on disk, under <data dir>/environments:

    <id>/source/            the project as the owner put it in (files, imports)
    <id>/versions/<n>/      version n: the source snapshotted, then what its build installed;
                            read-only once built, mounted at /env/<slug> in every session
    <id>/build-notes/<n>/   the server's notes of version n's build (its trees' keys, the
                            system packages it unpacked): out of every build's reach
    .cache/                 what builds reuse (package downloads, keyed on the manifests)

A version's folder is mounted at the same path in its build as in a session (`mount_path`):
a virtual environment and the scripts pip and npm write hold absolute paths."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MOUNT_ROOT = "/env"
_SLUG_RUNS = re.compile(r"[^a-z0-9]+")
MAX_SLUG = 63


def slug_of(name: str) -> str:
    """The path segment a name yields ('Content Studio' -> 'content-studio'); empty when it
    yields none (environment_invalid)."""
    return _SLUG_RUNS.sub("-", name.lower()).strip("-")[:MAX_SLUG].strip("-")


def mount_path(slug: str) -> str:
    """Where sessions (and its builds) see the environment."""
    return f"{MOUNT_ROOT}/{slug}"


@dataclass(frozen=True)
class EnvironmentLayout:
    root: Path  # <data dir>/environments

    def folder(self, environment_id: str) -> Path:
        return self.root / environment_id

    def source(self, environment_id: str) -> Path:
        return self.folder(environment_id) / "source"

    def version(self, environment_id: str, version: int) -> Path:
        return self.folder(environment_id) / "versions" / str(version)

    def build_notes(self, environment_id: str, version: int) -> Path:
        return self.folder(environment_id) / "build-notes" / str(version)

    @property
    def cache(self) -> Path:
        return self.root / ".cache"
