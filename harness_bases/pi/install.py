"""Where the pinned Pi coding agent lives under the tools folder, and how it gets there.

Pi (`@mariozechner/pi-coding-agent`, npm) is a node program that needs node >= 20.6, newer
than Debian bookworm's: it runs on the pinned node of `harness_bases/node_runtime.py`, started
as `<node> <cli.js>` (never through npm's bin link, whose shebang asks for the system node).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path, PurePosixPath

from harness_bases import node_runtime
from harness_bases.installing import VERSION_ENV, npm_install, parse_version

CLI_VERSION = "0.73.1"
PACKAGE = "@mariozechner/pi-coding-agent"
VERSION_TIMEOUT = 30.0
INSTALL_TIMEOUT = 600.0
# Offline: no update check, no install ping, no package lookups (README "Settings").
QUIET_ENV = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}


# Pi's MCP client (Pi has none of its own), loaded with `-e`; kept next to the pinned Pi, so
# it is read-only inside the sandbox.
MCP_EXTENSION_NAME = "uhp-mcp-extension.js"
MCP_EXTENSION_SOURCE = Path(__file__).with_name("mcp_extension.js")


class PiInstallError(RuntimeError):
    """The pinned Pi could not be installed or does not run."""


def prefix(tools_root: str) -> str:
    """This version's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / "pi" / CLI_VERSION)


def cli_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/node_modules/{PACKAGE}/dist/cli.js"


def command(tools_root: str) -> list[str]:
    """How to start the CLI: the pinned node running Pi's entry script."""
    return [node_runtime.node_path(tools_root), cli_path(tools_root)]


def mcp_extension_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/{MCP_EXTENSION_NAME}"


def _mcp_extension_current(tools_dir: Path) -> bool:
    installed = Path(mcp_extension_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == MCP_EXTENSION_SOURCE.read_bytes()


def installed_version(tools_dir: Path) -> str | None:
    """What the installed CLI reports with --version on the pinned node, or None (also when
    its MCP extension is missing or stale)."""
    if not _mcp_extension_current(tools_dir):
        return None
    return _cli_version(tools_dir)


def _cli_version(tools_dir: Path) -> str | None:
    if not Path(cli_path(str(tools_dir))).is_file():
        return None
    if not Path(node_runtime.node_path(str(tools_dir))).is_file():
        return None
    # Pi prints its version on stderr when stdout is not a terminal.
    try:
        result = subprocess.run(
            [*command(str(tools_dir)), "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT,
            env={**VERSION_ENV, **QUIET_ENV, "HOME": "/nonexistent"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    return parse_version(result.stdout + result.stderr, exact=True)


def install(tools_dir: Path) -> None:
    """Install the pinned node and Pi under tools_dir unless they already run."""
    node_runtime.install(tools_dir)
    if installed_version(tools_dir) == CLI_VERSION:
        return
    if _cli_version(tools_dir) != CLI_VERSION:
        _npm_install(tools_dir)
    shutil.copyfile(MCP_EXTENSION_SOURCE, mcp_extension_path(str(tools_dir)))
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise PiInstallError(f"Pi reports {found!r} after install, expected {CLI_VERSION}")


def _npm_install(tools_dir: Path) -> None:
    npm_install(
        Path(prefix(str(tools_dir))),
        PACKAGE,
        CLI_VERSION,
        label="Pi",
        timeout=INSTALL_TIMEOUT,
        error=PiInstallError,
    )
