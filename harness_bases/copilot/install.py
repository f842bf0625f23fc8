"""Where the pinned GitHub Copilot CLI lives under the tools folder, and how it gets there.

`@github/copilot` (npm) is a launcher; the CLI itself is a native program in a per-platform
package (`@github/copilot-linux-x64`, `-linux-arm64`) npm installs beside it. The sandbox
starts that program directly (no node), through the base's launcher (launcher.py, copied
next to it and run with Debian's python3), which gives it the prompt and turns an interrupt
into the SIGINT it stops a turn on.

The program unpacks its own JavaScript package (235 MB) into `~/.cache/copilot/pkg/` the
first time it runs for a HOME: in every session's agent home, that would be a quarter of a
gigabyte each. It is unpacked once here, under the tools folder (`dist_dir`), and every turn
names it with `COPILOT_CLI_DIST_DIR`.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from harness_bases.base import Warmup
from harness_bases.installing import npm_arch, npm_install, reported_version

PACKAGE = "@github/copilot"
CLI_VERSION = "1.0.102"
LAUNCHER_NAME = "uhp_copilot_launcher.py"
LAUNCHER_SOURCE = Path(__file__).with_name("launcher.py")
SYSTEM_PYTHON = "/usr/bin/python3"
INSTALL_TIMEOUT = 600.0
VERSION_TIMEOUT = 60.0
# No network but the model provider: no GitHub sign-in, telemetry, web tools, GitHub MCP
# server or update check (COPILOT_OFFLINE), and no download of a newer CLI.
QUIET_ENV = {"COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false", "NO_COLOR": "1"}


class CopilotInstallError(RuntimeError):
    """The pinned Copilot CLI could not be installed or does not run."""


def prefix(tools_root: str) -> str:
    """This version's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / "copilot" / CLI_VERSION)


def _platform() -> str:
    return f"linux-{npm_arch(None, program='Copilot CLI', error=CopilotInstallError)}"


def binary_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/node_modules/@github/copilot-{_platform()}/copilot"


def _unpack_home(tools_root: str) -> str:
    return f"{prefix(tools_root)}/unpacked"


def dist_dir(tools_root: str) -> str:
    """The CLI's unpacked package, made once at install (COPILOT_CLI_DIST_DIR)."""
    return f"{_unpack_home(tools_root)}/.cache/copilot/pkg/{_platform()}/{CLI_VERSION}"


def launcher_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/{LAUNCHER_NAME}"


def _launcher_current(tools_dir: Path) -> bool:
    installed = Path(launcher_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == LAUNCHER_SOURCE.read_bytes()


def installed_version(tools_dir: Path) -> str | None:
    """What the installed CLI reports ("GitHub Copilot CLI 1.0.102."), or None when it or its
    launcher is missing, stale or does not run."""
    binary = Path(binary_path(str(tools_dir)))
    dist = Path(dist_dir(str(tools_dir)))
    if not binary.exists() or not dist.is_dir() or not _launcher_current(tools_dir):
        return None
    env = {**QUIET_ENV, "HOME": "/nonexistent", "COPILOT_CLI_DIST_DIR": str(dist)}
    found = reported_version([str(binary), "--version"], timeout=VERSION_TIMEOUT, extra_env=env)
    return found.rstrip(".") if found else None


def warmup(tools_root: str) -> Warmup:
    """A prompt with no model to send it to, on the package unpacked at install: it loads
    the CLI's code, then exits 1 ("Offline mode requires a local model provider"). Its
    version command loads too little of it to matter."""
    env = {**QUIET_ENV, "COPILOT_CLI_DIST_DIR": dist_dir(tools_root)}
    argv = [binary_path(tools_root), "-p", "warm-up", "--model", "none", "--no-auto-update"]
    return Warmup(argv, env, exit_codes=(1,))


def install(tools_dir: Path) -> None:
    """npm-install the pinned CLI under tools_dir unless it already runs."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    root = Path(prefix(str(tools_dir)))
    npm_install(
        root,
        PACKAGE,
        CLI_VERSION,
        label="GitHub Copilot CLI",
        timeout=INSTALL_TIMEOUT,
        error=CopilotInstallError,
    )
    shutil.copyfile(LAUNCHER_SOURCE, launcher_path(str(tools_dir)))
    # Its first run unpacks the package under HOME: here, once, under the tools folder.
    unpack_env = {**QUIET_ENV, "HOME": _unpack_home(str(tools_dir))}
    reported_version(
        [binary_path(str(tools_dir)), "--version"], timeout=INSTALL_TIMEOUT, extra_env=unpack_env
    )
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise CopilotInstallError(
            f"Copilot CLI reports {found!r} after install, expected {CLI_VERSION}"
        )
