"""What a turn on an environment reads: one version, at the environment's mount path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from uhp_server.environments.layout import mount_path


@dataclass(frozen=True)
class EnvironmentMount:
    environment_id: str
    slug: str
    version: int
    host_path: Path  # the version's folder (EnvironmentLayout.version)
    entry: str = ""  # how the owner runs the project, repeated to the agent

    @property
    def mount(self) -> str:
        return mount_path(self.slug)
