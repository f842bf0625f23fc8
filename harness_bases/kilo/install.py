"""Where the pinned Kilo Code CLI lives under the tools folder, and how it gets there.

The npm package `@kilocode/cli` is a launcher; the program is a native (Bun-compiled) binary
in a per-platform optional dependency (`@kilocode/cli-linux-x64`). We run that binary
directly: no node in the sandbox. The registry does not publish every launcher version's
platform packages (7.8.1 has none for Linux): the pin is a version that has both.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from harness_bases.acp.opencode_family import SCRUBBED_SHELL
from harness_bases.installing import npm_arch, npm_install, reported_version

CLI_VERSION = "7.7.7"
PACKAGE = "@kilocode/cli"
VERSION_TIMEOUT = 30.0
INSTALL_TIMEOUT = 900.0


class KiloInstallError(RuntimeError):
    """The pinned Kilo Code CLI could not be installed or does not run."""


def _platform_package(machine: str | None = None) -> str:
    """The platform package with the glibc build (Debian's libc)."""
    return (
        f"@kilocode/cli-linux-{npm_arch(machine, program='Kilo Code CLI', error=KiloInstallError)}"
    )


def prefix(tools_root: str) -> str:
    return str(PurePosixPath(tools_root) / "kilo" / CLI_VERSION)


def binary_path(tools_root: str, machine: str | None = None) -> str:
    return f"{prefix(tools_root)}/node_modules/{_platform_package(machine)}/bin/kilo"


def shell_path(tools_root: str) -> str:
    """The shell the agent's commands run with (harness_bases/acp/scrubbed_shell.sh)."""
    return f"{prefix(tools_root)}/uhp-shell/bash"


def _shell_current(tools_dir: Path) -> bool:
    installed = Path(shell_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == SCRUBBED_SHELL.read_bytes()


def _install_shell(tools_dir: Path) -> None:
    target = Path(shell_path(str(tools_dir)))
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SCRUBBED_SHELL, target)
    os.chmod(target, 0o755)


def installed_version(tools_dir: Path) -> str | None:
    """What the installed binary reports with --version, or None if it does not run (or the
    shell it needs is missing or stale)."""
    binary = Path(binary_path(str(tools_dir)))
    if not binary.is_file() or not _shell_current(tools_dir):
        return None
    return reported_version(
        [str(binary), "--version"],
        timeout=VERSION_TIMEOUT,
        extra_env={"HOME": "/nonexistent", "KILO_DISABLE_AUTOUPDATE": "1"},
    )


def install(tools_dir: Path) -> None:
    """npm-install the pinned CLI under tools_dir/kilo/<version> unless it already runs."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    _install_shell(tools_dir)
    if installed_version(tools_dir) == CLI_VERSION:
        return
    npm_install(
        Path(prefix(str(tools_dir))),
        PACKAGE,
        CLI_VERSION,
        label="Kilo Code CLI",
        timeout=INSTALL_TIMEOUT,
        error=KiloInstallError,
    )
    # npm exits 0 even when it skipped the platform package; only a running binary counts.
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise KiloInstallError(
            f"Kilo Code CLI reports {found!r} after install, expected {CLI_VERSION}"
        )
