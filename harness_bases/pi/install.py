"""The pinned Pi coding agent under the tools folder, with the MCP extension the base loads.

Pi (`@mariozechner/pi-coding-agent`, npm) is a node program that needs node >= 20.6, newer
than Debian bookworm's: it runs on the pinned node of `harness_bases/node_runtime.py`, started
as `<node> <cli.js>` (never through npm's bin link, whose shebang asks for the system node).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness_bases.node_runtime import NodeCli

# Offline: no update check, no install ping, no package lookups (docs/harnesses.md, "The bases").
QUIET_ENV = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}

# Pi's MCP client (Pi has none of its own), loaded with `-e`; kept next to the pinned Pi, so
# it is read-only inside the sandbox.
MCP_EXTENSION_NAME = "uhp-mcp-extension.js"
MCP_EXTENSION_SOURCE = Path(__file__).with_name("mcp_extension.js")


class PiInstallError(RuntimeError):
    """The pinned Pi could not be installed or does not run."""


CLI = NodeCli(
    label="Pi",
    package="@mariozechner/pi-coding-agent",
    version="0.73.1",
    folder="pi",
    entry="dist/cli.js",
    error=PiInstallError,
    version_env=QUIET_ENV,
    version_on_stderr=True,  # Pi prints its version on stderr when stdout is not a terminal
)
CLI_VERSION = CLI.version
PACKAGE = CLI.package
command = CLI.command


def mcp_extension_path(tools_root: str) -> str:
    return f"{CLI.prefix(tools_root)}/{MCP_EXTENSION_NAME}"


def _mcp_extension_current(tools_dir: Path) -> bool:
    installed = Path(mcp_extension_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == MCP_EXTENSION_SOURCE.read_bytes()


def installed_version(tools_dir: Path) -> str | None:
    """What the installed CLI reports, or None (also when its MCP extension is missing or
    stale)."""
    return CLI.installed_version(tools_dir) if _mcp_extension_current(tools_dir) else None


def install(tools_dir: Path) -> None:
    """Install the pinned node, Pi and the MCP extension under tools_dir unless they run."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    CLI.install(tools_dir)
    shutil.copyfile(MCP_EXTENSION_SOURCE, mcp_extension_path(str(tools_dir)))
    if installed_version(tools_dir) != CLI_VERSION:
        raise PiInstallError("Pi's MCP extension did not land beside it")
