"""Where the pinned Cline CLI lives under the tools folder, and how it gets there.

The npm package `cline` is a launcher; the program is a native (Bun-compiled) binary in a
per-platform optional dependency (`@cline/cli-linux-x64`). We run that binary directly: no
node in the sandbox. Beside it goes the script every command's bash reads first
(`BASH_ENV`, scrub.sh), read-only in the sandbox.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from harness_bases.installing import npm_arch, npm_install, reported_version

CLI_VERSION = "3.0.65"
PACKAGE = "cline"
VERSION_TIMEOUT = 30.0
INSTALL_TIMEOUT = 900.0
SCRUB_SOURCE = Path(__file__).with_name("scrub.sh")


class ClineInstallError(RuntimeError):
    """The pinned Cline CLI could not be installed or does not run."""


def _platform_package(machine: str | None = None) -> str:
    """The platform package with the glibc build (Debian's libc)."""
    return f"@cline/cli-linux-{npm_arch(machine, program='Cline CLI', error=ClineInstallError)}"


def prefix(tools_root: str) -> str:
    return str(PurePosixPath(tools_root) / "cline" / CLI_VERSION)


def binary_path(tools_root: str, machine: str | None = None) -> str:
    return f"{prefix(tools_root)}/node_modules/{_platform_package(machine)}/bin/cline"


def scrub_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/uhp-scrub.sh"


def _scrub_current(tools_dir: Path) -> bool:
    installed = Path(scrub_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == SCRUB_SOURCE.read_bytes()


def installed_version(tools_dir: Path) -> str | None:
    """What the installed binary reports with --version, or None if it does not run (or the
    scrub script is missing or stale)."""
    binary = Path(binary_path(str(tools_dir)))
    if not binary.is_file() or not _scrub_current(tools_dir):
        return None
    return reported_version(
        [str(binary), "--version"],
        timeout=VERSION_TIMEOUT,
        extra_env={"HOME": "/nonexistent", "CLINE_NO_AUTO_UPDATE": "1"},
    )


def install(tools_dir: Path) -> None:
    """npm-install the pinned CLI under tools_dir/cline/<version> unless it already runs."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    Path(prefix(str(tools_dir))).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SCRUB_SOURCE, scrub_path(str(tools_dir)))
    if installed_version(tools_dir) == CLI_VERSION:
        return
    npm_install(
        Path(prefix(str(tools_dir))),
        PACKAGE,
        CLI_VERSION,
        label="Cline CLI",
        timeout=INSTALL_TIMEOUT,
        error=ClineInstallError,
    )
    # npm exits 0 even when it skipped the platform package; only a running binary counts.
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise ClineInstallError(
            f"Cline CLI reports {found!r} after install, expected {CLI_VERSION}"
        )
