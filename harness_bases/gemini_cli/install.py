"""Where the pinned Gemini CLI lives under the tools folder, and how it gets there.

Gemini CLI (`@google/gemini-cli`, npm) 0.61.0 is one bundled node program (node >= 20): it
runs on the pinned node of `harness_bases/node_runtime.py`, started as
`<node> <bundle/gemini.js>`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from harness_bases import node_runtime
from harness_bases.installing import npm_install, reported_version

CLI_VERSION = "0.61.0"
PACKAGE = "@google/gemini-cli"
VERSION_TIMEOUT = 60.0
INSTALL_TIMEOUT = 600.0
# One process: no relaunch of itself with a bigger heap (it would double the start-up).
NO_RELAUNCH = {"GEMINI_CLI_NO_RELAUNCH": "true"}


class GeminiCliInstallError(RuntimeError):
    """The pinned Gemini CLI could not be installed or does not run."""


def prefix(tools_root: str) -> str:
    """This version's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / "gemini-cli" / CLI_VERSION)


def cli_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/node_modules/{PACKAGE}/bundle/gemini.js"


def command(tools_root: str) -> list[str]:
    """How to start the CLI: the pinned node running Gemini CLI's bundle."""
    return [node_runtime.node_path(tools_root), cli_path(tools_root)]


def installed_version(tools_dir: Path) -> str | None:
    """What the installed CLI reports with --version on the pinned node, or None."""
    if not Path(cli_path(str(tools_dir))).is_file():
        return None
    if not Path(node_runtime.node_path(str(tools_dir))).is_file():
        return None
    return reported_version(
        [*command(str(tools_dir)), "--version"],
        timeout=VERSION_TIMEOUT,
        extra_env={"HOME": "/nonexistent", **NO_RELAUNCH},
        exact=True,
    )


def install(tools_dir: Path) -> None:
    """Install the pinned node and Gemini CLI under tools_dir unless they already run."""
    node_runtime.install(tools_dir)
    if installed_version(tools_dir) == CLI_VERSION:
        return
    npm_install(
        Path(prefix(str(tools_dir))),
        PACKAGE,
        CLI_VERSION,
        label="Gemini CLI",
        timeout=INSTALL_TIMEOUT,
        error=GeminiCliInstallError,
    )
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise GeminiCliInstallError(
            f"Gemini CLI reports {found!r} after install, expected {CLI_VERSION}"
        )
