"""Environments as their rows and version folders, made directly (the chapter's routes and
its builder are tested on their own): what a session on an environment reads.

`add_environment` inserts an environment; `add_version` snapshots files into its next version
folder (or lets `make` fill it, at the version's mount path as a build would: a virtual
environment holds absolute paths), ends its build `ready` (active) or leaves it `building`,
and makes the folder read-only for everyone but its owner, as a finished build is."""

from __future__ import annotations

import os
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from storage import environments as environment_store
from storage import keys as key_store
from storage.db import Database
from storage.environments import BuildEnd
from storage.tables import EnvironmentRow
from uhp_server.environments.layout import EnvironmentLayout, slug_of


def principal_of(db: Database, name: str = key_store.DEFAULT_PRINCIPAL) -> str:
    """The id of the principal a key was made for (`default`: the server's configured key)."""
    return db.run(key_store.ensure_principal, name).id


def add_environment(db: Database, principal_id: str, name: str, entry: str = "") -> EnvironmentRow:
    now = int(time.time() * 1000)
    row = EnvironmentRow(
        id="henv_" + uuid.uuid4().hex,  # the chapter's id prefix (Environments §2)
        principal_id=principal_id,
        name=name,
        slug=slug_of(name),
        entry=entry,
        created_at_ms=now,
        updated_at_ms=now,
    )
    inserted = db.run(environment_store.insert_environment, row)
    assert inserted is not None, f"an environment named {name!r} already exists"
    return inserted


def add_version(
    db: Database,
    layout: EnvironmentLayout,
    environment: EnvironmentRow,
    files: dict[str, str] | None = None,
    make: Callable[[Path], None] | None = None,
    *,
    ready: bool = True,
    seal: bool = True,
) -> int:
    """A new version of `environment` holding `files` (relative path: text), then whatever
    `make(folder)` writes; ready (and active) unless `ready=False`, which leaves it building.
    `seal=False` leaves the modes `make` gave (a probe's world-writable files: only the mount
    can refuse the agent then)."""
    started = db.run(environment_store.start_build, environment.id)
    assert started is not None, "a build of this environment is running"
    version = started.version
    folder = layout.version(environment.id, version)
    folder.mkdir(parents=True)
    for relative, text in (files or {}).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if make is not None:
        make(folder)
    if ready:
        end = BuildEnd(ready=True, log="made by the test")
        db.run(environment_store.finish_build, environment.id, version, end)
    if seal:
        _read_only(folder)
    return version


def _read_only(folder: Path) -> None:
    """What a finished build leaves: readable and runnable by all, written by none but its
    owner (the sandbox's read-only mount is what stops an agent; this is the folder itself)."""
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in (*dirnames, *filenames):
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            path.chmod(mode & ~(stat.S_IWGRP | stat.S_IWOTH) | stat.S_IRGRP | stat.S_IROTH)
            if path.is_dir() or mode & stat.S_IXUSR:
                path.chmod(path.stat().st_mode | stat.S_IXGRP | stat.S_IXOTH)
    folder.chmod(0o755)
    for parent in (folder.parent, folder.parent.parent):
        parent.chmod(parent.stat().st_mode | stat.S_IXOTH)
