"""The local sandbox's resource limits, and the watch that ends a turn which hits one.

memory and processes: a per-turn cgroup (sandbox/cgroups.py), when the server may make one.
file size: RLIMIT_FSIZE on the sandbox, so a write past it fails (SIGXFSZ / EFBIG).
workspace disk: the session's workspace and agent home are measured while the turn runs;
the kernel has no per-folder quota that works on every filesystem without setup.
A limit hit stops the whole sandbox; the turn then fails with the reason.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from uhp_server.sandbox.base import RunLimits
from uhp_server.sandbox.cgroups import TurnCgroup

_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# The disk walk costs time in a big workspace: never spend more than a tenth of the turn on it.
DISK_CHECK_MIN_SECONDS = 1.0
DISK_CHECK_COST_FACTOR = 10
WATCH_SECONDS = 0.25  # how often the cgroup's counters are read


def parse_size(text: str | int) -> int:
    """Bytes in "512m", "4g", "1048576" (binary units); 0 means no limit."""
    if isinstance(text, int):
        return text
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (e.g. 512m, 4g)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def human(size: int) -> str:
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            value = size / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} bytes"


@dataclass(frozen=True)
class LocalLimits:
    """Per-turn limits of the local sandbox (UHP_LOCAL_SANDBOX_*); 0 disables one."""

    memory_bytes: int = 4 << 30
    pids: int = 512
    file_size_bytes: int = 4 << 30
    disk_bytes: int = 20 << 30
    subject: str = "turn"  # what the messages say was stopped: a turn, a build

    def memory_message(self) -> str:
        return (
            f"The {self.subject} exceeded the sandbox's memory limit ({human(self.memory_bytes)})."
        )

    def pids_message(self) -> str:
        return f"The {self.subject} exceeded the sandbox's process limit ({self.pids} processes)."

    def disk_message(self) -> str:
        where = "the workspace and agent home" if self.subject == "turn" else "what it writes"
        return (
            f"The {self.subject} exceeded the sandbox's workspace disk limit "
            f"({human(self.disk_bytes)} for {where})."
        )

    def file_size_message(self) -> str:
        return (
            f"The {self.subject} exceeded the sandbox's file size limit "
            f"({human(self.file_size_bytes)})."
        )

    def over(self, run: RunLimits | None) -> LocalLimits:
        """These limits with what one start asks for in their place (SessionMounts.limits)."""
        if run is None:
            return self
        return replace(
            self,
            memory_bytes=run.memory_bytes or self.memory_bytes,
            disk_bytes=run.disk_bytes or self.disk_bytes,
            subject=run.subject,
        )


@dataclass
class DiskUsage:
    total_bytes: int = 0  # allocated, so a sparse file counts what it really takes
    largest_file_bytes: int = 0  # apparent size, which is what RLIMIT_FSIZE limits


def disk_usage(folders: list[Path], *, apparent: bool = False) -> DiskUsage:
    """What the folders hold on disk; links are not followed, hard links counted once. With
    `apparent`, a file counts at least its size (st_size): a sparse file's holes are what a
    copy of it may write out."""
    usage = DiskUsage()
    seen: set[tuple[int, int]] = set()
    stack = [str(f) for f in folders]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                if info.st_nlink > 1 and not entry.is_dir(follow_symlinks=False):
                    if (info.st_dev, info.st_ino) in seen:
                        continue
                    seen.add((info.st_dev, info.st_ino))
                used = info.st_blocks * 512
                if apparent and entry.is_file(follow_symlinks=False):
                    used = max(used, info.st_size)
                usage.total_bytes += used
                if entry.is_file(follow_symlinks=False):
                    usage.largest_file_bytes = max(usage.largest_file_bytes, info.st_size)
    return usage


class LimitWatch:
    """Checks one sandbox's limits: the cgroup's counters often, the folders' size less so."""

    def __init__(
        self,
        limits: LocalLimits,
        cgroup: TurnCgroup | None,
        folders: list[Path],
        *,
        apparent: bool = False,  # disk_usage's: files count their size, holes too
    ):
        self.limits = limits
        self.cgroup = cgroup
        self.folders = folders
        self.apparent = apparent
        self._next_disk_check = 0.0

    def cgroup_reason(self) -> str | None:
        if self.cgroup is None:
            return None
        # The process limit first: a runaway of processes (a fork bomb) can also fill the
        # memory limit with them, and the processes are the cause to report.
        if self.limits.pids and self.cgroup.pids_exceeded():
            return self.limits.pids_message()
        if self.limits.memory_bytes and self.cgroup.memory_exceeded():
            return self.limits.memory_message()
        return None

    async def disk_reason(self, force: bool = False) -> str | None:
        if not (self.limits.disk_bytes or self.limits.file_size_bytes):
            return None
        now = time.monotonic()
        if not force and now < self._next_disk_check:
            return None
        usage = await asyncio.to_thread(disk_usage, self.folders, apparent=self.apparent)
        cost = time.monotonic() - now
        self._next_disk_check = now + max(DISK_CHECK_MIN_SECONDS, cost * DISK_CHECK_COST_FACTOR)
        if self.limits.disk_bytes and usage.total_bytes > self.limits.disk_bytes:
            return self.limits.disk_message()
        # A write that RLIMIT_FSIZE stopped leaves its file at exactly the limit.
        if self.limits.file_size_bytes and usage.largest_file_bytes >= self.limits.file_size_bytes:
            return self.limits.file_size_message()
        return None

    async def reason(self, force_disk: bool = False) -> str | None:
        return self.cgroup_reason() or await self.disk_reason(force_disk)
