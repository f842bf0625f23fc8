"""The Builder of a server that has no way to build: every build fails, saying so, and no
runtime is offered. Stands in until the sandbox toolchain's builder is wired in
(context.sandbox_builder)."""

from __future__ import annotations

import platform

from uhp_server.environments.builder import (
    BuildFailed,
    BuildProgress,
    BuildRequest,
    BuildResult,
    Runtimes,
)


class UnavailableBuilder:
    async def build(self, request: BuildRequest, progress: BuildProgress) -> BuildResult:
        raise BuildFailed("This server has no environment builder installed.")

    def runtimes(self) -> Runtimes:
        return Runtimes(python=(), node="", os=platform.platform())
