"""A build's limits (UHP_ENVIRONMENT_BUILD_*): its time, its memory and its disk, like a
turn's. The sandbox enforces the memory (a cgroup, the container's limit) and, in the local
sandbox, watches the disk too; the builder keeps the clock and watches the disk itself in
every sandbox (the docker one watches none), counting the version's folder, the build's
scratch workspace and home, and the principal's download cache it writes. A file counts its
size, not only its blocks: a sparse file's holes are written out by a copy of the tree (a
rebuild that reuses it) and by whatever reads it as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from uhp_server.sandbox.base import RunLimits
from uhp_server.sandbox.limits import LimitWatch, LocalLimits, human, parse_size
from uhp_server.settings import Settings


@dataclass(frozen=True)
class BuildLimits:
    seconds: float  # the whole build; 0: none
    memory_bytes: int
    disk_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> BuildLimits:
        return cls(
            seconds=settings.environment_build_timeout_seconds,
            memory_bytes=parse_size(settings.environment_build_memory),
            disk_bytes=parse_size(settings.environment_build_disk),
        )

    def run_limits(self) -> RunLimits:
        """What each of the build's sandbox starts asks for in place of a turn's limits."""
        return RunLimits(self.memory_bytes, self.disk_bytes, subject="build")

    def disk_watch(self, folders: list[Path]) -> LimitWatch | None:
        if not self.disk_bytes:
            return None
        limits = LocalLimits(
            memory_bytes=0, pids=0, file_size_bytes=0, disk_bytes=self.disk_bytes, subject="build"
        )
        return LimitWatch(limits, None, folders, apparent=True)

    def time_message(self) -> str:
        return f"The build exceeded its time limit ({_duration(self.seconds)})."

    def killed_message(self, code: int) -> str:
        """A step the kernel killed (SIGKILL) without the sandbox saying why: in a container,
        the memory limit's OOM kill is the one that does."""
        limit = f" ({human(self.memory_bytes)})" if self.memory_bytes else ""
        return f"The build was killed (exit code {code}), most likely by its memory limit{limit}."


def _duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds:g} seconds"
