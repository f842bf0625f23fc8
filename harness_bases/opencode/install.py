"""Where the pinned OpenCode CLI lives under the tools folder, and how it gets there.

The npm package `opencode-ai` is a launcher; the program is a native (Bun-compiled) binary in
a per-platform optional dependency. We run that binary directly: no node in the sandbox.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from harness_bases.acp.opencode_family import SCRUBBED_SHELL
from harness_bases.installing import npm_arch, npm_install, reported_version

CLI_VERSION = "1.18.33"
PACKAGE = "opencode-ai"
VERSION_TIMEOUT = 30.0
INSTALL_TIMEOUT = 900.0
SHELL_SOURCE = SCRUBBED_SHELL


class OpenCodeInstallError(RuntimeError):
    """The pinned OpenCode CLI could not be installed or does not run."""


def _platform_package(machine: str | None = None) -> str:
    """The platform package with the glibc build (Debian's libc)."""
    return f"opencode-linux-{npm_arch(machine, program='OpenCode', error=OpenCodeInstallError)}"


def prefix(tools_root: str) -> str:
    return str(PurePosixPath(tools_root) / "opencode" / CLI_VERSION)


def binary_path(tools_root: str, machine: str | None = None) -> str:
    return f"{prefix(tools_root)}/node_modules/{_platform_package(machine)}/bin/opencode"


def shell_path(tools_root: str) -> str:
    """The shell the agent's commands run with (named bash: OpenCode picks how to call a
    shell by its name)."""
    return f"{prefix(tools_root)}/uhp-shell/bash"


def _shell_current(tools_dir: Path) -> bool:
    installed = Path(shell_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == SHELL_SOURCE.read_bytes()


def _install_shell(tools_dir: Path) -> None:
    target = Path(shell_path(str(tools_dir)))
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SHELL_SOURCE, target)
    os.chmod(target, 0o755)


def installed_version(tools_dir: Path) -> str | None:
    """What the installed binary reports with --version, or None if it does not run (or
    the shell it needs is missing or stale)."""
    binary = Path(binary_path(str(tools_dir)))
    if not binary.is_file() or not _shell_current(tools_dir):
        return None
    return reported_version([str(binary), "--version"], timeout=VERSION_TIMEOUT)


def install(tools_dir: Path) -> None:
    """npm-install the pinned CLI under tools_dir/opencode/<version> unless it already runs."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    _install_shell(tools_dir)
    if installed_version(tools_dir) == CLI_VERSION:
        return
    npm_install(
        Path(prefix(str(tools_dir))),
        PACKAGE,
        CLI_VERSION,
        label="OpenCode",
        timeout=INSTALL_TIMEOUT,
        error=OpenCodeInstallError,
    )
    # npm exits 0 even when it skipped the platform package; only a running binary counts.
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise OpenCodeInstallError(
            f"OpenCode reports {found!r} after install, expected {CLI_VERSION}"
        )
