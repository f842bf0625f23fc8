"""Artifacts (Files §2): the files a turn created or changed in its session's workspace.

The workspace is snapshotted after the base wrote its config and the task's attachments were
placed, and again when the CLI has reported its outcome. Every regular file that is new or
changed becomes an artifact of the session's container: its bytes are copied into the blob
store (content-addressed) and a row records where it came from. Nothing is ever followed:
the walk uses lstat, symlinks and special files are skipped, a path with a link anywhere in
it is skipped, and the file is opened with O_NOFOLLOW and checked to be the one the walk saw.

Skipped on purpose: version-control internals and dependency trees (`EXCLUDED_DIRS`), the
folders every registered base declares its CLI keeps its state in (`state_dirs`), and
whatever would pass the per-session caps. What was skipped is said in a visible notice.
"""

from __future__ import annotations

import functools
import mimetypes
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness_bases import registry
from storage import artifacts as artifact_store
from storage.blobs import BlobStore, BlobTooLarge
from storage.db import Database
from storage.tables import ArtifactRow
from uhp_server.ids import new_id

# Folder names never searched for artifacts, at any depth: version-control internals and
# dependency trees a turn may install. The CLIs' own folders come from the bases (below).
EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".cache",
        ".npm",
        "node_modules",
        "__pycache__",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
MAX_WALK_ENTRIES = 100_000  # a workspace larger than this is only partly compared
MAX_NOTICE_LINES = 20

Entry = tuple[int, int, int, int]  # size, mtime_ns, inode, device: the one file, not a look-alike
Snapshot = dict[str, Entry]


@dataclass(frozen=True)
class ArtifactLimits:
    max_count: int  # per session, over all turns
    max_file_bytes: int
    max_session_bytes: int


@dataclass
class Collected:
    rows: list[ArtifactRow] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)

    def notice(self) -> str | None:
        if not self.skipped:
            return None
        lines = [f"- {_shown(path)}: {why}" for path, why in self.skipped[:MAX_NOTICE_LINES]]
        if len(self.skipped) > MAX_NOTICE_LINES:
            lines.append(f"- and {len(self.skipped) - MAX_NOTICE_LINES} more")
        return "Some files this turn wrote were not kept as artifacts:\n" + "\n".join(lines)


def _shown(path: str) -> str:
    """A path as text a client can always decode (an undecodable byte becomes U+FFFD)."""
    return os.fsencode(path).decode("utf-8", "replace")


@functools.cache
def excluded_dirs() -> frozenset[str]:
    """EXCLUDED_DIRS and every registered base's `state_dirs` (read once per process)."""
    declared = {name for base in registry().values() for name in base.state_dirs}
    return EXCLUDED_DIRS | declared


def snapshot(root: Path, excluded: frozenset[str] | None = None) -> Snapshot:
    """Every regular file under root (relative path -> size, mtime, inode), links unfollowed,
    never inside a folder named in `excluded` (default: `excluded_dirs()`)."""
    excluded = excluded_dirs() if excluded is None else excluded
    found: Snapshot = {}
    pending = [""]
    while pending and len(found) < MAX_WALK_ENTRIES:
        relative = pending.pop()
        try:
            entries = list(os.scandir(root / relative if relative else root))
        except OSError:
            continue
        for entry in entries:
            path = f"{relative}/{entry.name}" if relative else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if entry.name not in excluded:
                    pending.append(path)
            elif stat.S_ISREG(info.st_mode):
                found[path] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev)
    return found


def changed_paths(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(path for path, entry in after.items() if before.get(path) != entry)


class ArtifactCollector:
    """Turns the changes of one turn into stored artifacts, within the session's caps."""

    def __init__(self, db: Database, blobs: BlobStore, limits: ArtifactLimits) -> None:
        self.db = db
        self.blobs = blobs
        self.limits = limits

    def collect(
        self,
        root: Path,
        before: Snapshot,
        *,
        principal_id: str,
        session_id: str,
        container_id: str,
        response_id: str,
    ) -> Collected:
        after = snapshot(root)
        result = Collected()
        changed = changed_paths(before, after)
        if not changed:  # most turns: no database work at all
            return result
        count, total = self.db.run(artifact_store.session_totals, session_id)
        now = int(time.time())
        for path in changed:
            why = self._refusal(path, after[path][0], count, total)
            stored = None if why else self._store(root, path, after[path])
            if stored is None:
                result.skipped.append((path, why or "it changed or vanished while being read"))
                continue
            sha256, size = stored
            count, total = count + 1, total + size
            result.rows.append(
                ArtifactRow(
                    id=new_id("file"),
                    principal_id=principal_id,
                    session_id=session_id,
                    container_id=container_id,
                    response_id=response_id,
                    filename=path,
                    bytes=size,
                    media_type=mimetypes.guess_type(path)[0] or "application/octet-stream",
                    sha256=sha256,
                    created_at=now,
                )
            )
        if result.rows:
            self.db.run(artifact_store.insert_artifacts, result.rows)
        return result

    def _refusal(self, path: str, size: int, count: int, total: int) -> str | None:
        limits = self.limits
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            return "its name is not valid UTF-8"
        if count >= limits.max_count:
            return f"the session already has {limits.max_count} artifacts (the limit)"
        if size > limits.max_file_bytes:
            return f"larger than {limits.max_file_bytes} bytes (the per-file limit)"
        if total + size > limits.max_session_bytes:
            return f"the session's artifacts would pass {limits.max_session_bytes} bytes"
        return None

    def _store(self, root: Path, path: str, seen: Entry) -> tuple[str, int] | None:
        """Copy the file into the blob store if it is still the regular file the walk saw,
        inside the workspace, reached without any link."""
        full = os.path.join(root, path)
        if os.path.realpath(full) != os.path.join(os.path.realpath(root), path):
            return None
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(full, flags)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            now = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev)
            if not stat.S_ISREG(info.st_mode) or now != seen:
                return None  # not the file the walk saw (replaced, or still being written)
            try:
                return self.blobs.put_stream(handle, self.limits.max_file_bytes)
            except BlobTooLarge:
                return None
