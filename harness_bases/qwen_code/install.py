"""Where the pinned Qwen Code CLI lives under the tools folder, and how it gets there.

Qwen Code (`@qwen-code/qwen-code`, npm) 0.24.4 needs node >= 22: it runs on the pinned node
of `harness_bases/node_runtime.py`, started as `<node> <cli-entry.js>`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from harness_bases import node_runtime
from harness_bases.installing import npm_install, reported_version

CLI_VERSION = "0.24.4"
PACKAGE = "@qwen-code/qwen-code"
VERSION_TIMEOUT = 30.0
INSTALL_TIMEOUT = 600.0


class QwenCodeInstallError(RuntimeError):
    """The pinned Qwen Code could not be installed or does not run."""


def prefix(tools_root: str) -> str:
    """This version's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / "qwen-code" / CLI_VERSION)


def cli_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/node_modules/{PACKAGE}/cli-entry.js"


def command(tools_root: str) -> list[str]:
    """How to start the CLI: the pinned node running Qwen Code's entry script."""
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
        extra_env={"HOME": "/nonexistent", "QWEN_CODE_NO_RELAUNCH": "true"},
        exact=True,
    )


def install(tools_dir: Path) -> None:
    """Install the pinned node and Qwen Code under tools_dir unless they already run."""
    node_runtime.install(tools_dir)
    if installed_version(tools_dir) == CLI_VERSION:
        return
    npm_install(
        Path(prefix(str(tools_dir))),
        PACKAGE,
        CLI_VERSION,
        label="Qwen Code",
        timeout=INSTALL_TIMEOUT,
        error=QwenCodeInstallError,
    )
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise QwenCodeInstallError(
            f"Qwen Code reports {found!r} after install, expected {CLI_VERSION}"
        )
