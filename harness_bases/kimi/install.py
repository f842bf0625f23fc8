"""Where the pinned Kimi CLI lives under the tools folder, and how it gets there.

Kimi CLI (PyPI `kimi-cli`) needs Python >= 3.12: it is pip-installed into a private copy of a
host CPython under the tools folder (harness_bases/python_runtime.py). 1.51.0 is the last
release that runs: 1.52.0 turned every entry point into a deprecation notice pointing at its
TypeScript successor (and, without arguments, into a download of that successor's installer).
It is started through our launcher (acp_launcher.py, copied next to the copy), never through
the console script pip writes (whose shebang names the host path).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness_bases.installing import reported_version
from harness_bases.python_runtime import PythonCli
from harness_bases.python_start import python_argv

CLI_VERSION = "1.51.0"
PACKAGE = "kimi-cli"
LAUNCHER_NAME = "uhp_acp_launcher.py"
LAUNCHER_SOURCE = Path(__file__).with_name("acp_launcher.py")
VERSION_TIMEOUT = 60.0


class KimiInstallError(RuntimeError):
    """The pinned Kimi CLI could not be installed or does not run."""


CLI = PythonCli(
    label="Kimi CLI",
    requirements=(f"{PACKAGE}=={CLI_VERSION}",),
    version=CLI_VERSION,
    folder="kimi",
    module="kimi_cli",
    error=KimiInstallError,
    version_env={"KIMI_DISABLE_TELEMETRY": "1"},
)


def prefix(tools_root: str) -> str:
    return CLI.prefix(tools_root)


def python_path(tools_root: str) -> str:
    return CLI.python_path(tools_root)


def launcher_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/{LAUNCHER_NAME}"


def command(tools_root: str) -> list[str]:
    return python_argv(python_path(tools_root), launcher_path(tools_root))


def _launcher_current(tools_dir: Path) -> bool:
    installed = Path(launcher_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == LAUNCHER_SOURCE.read_bytes()


def installed_version(tools_dir: Path) -> str | None:
    """The version Kimi CLI reports through our launcher (which imports its ACP server), or
    None when it is missing, stale or does not run."""
    if not Path(python_path(str(tools_dir))).is_file() or not _launcher_current(tools_dir):
        return None
    return reported_version(
        [*command(str(tools_dir)), "--version"],
        timeout=VERSION_TIMEOUT,
        extra_env={"HOME": "/nonexistent", "KIMI_DISABLE_TELEMETRY": "1"},
        exact=True,  # the launcher prints the version alone; anything else is a failure
    )


def install(tools_dir: Path) -> None:
    """Copy a host CPython >= 3.12 and pip-install the pinned Kimi CLI into it under
    tools_dir/kimi/<version>, unless it already runs there."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    if CLI.installed_version(tools_dir) != CLI_VERSION:
        CLI.install(tools_dir)
    shutil.copyfile(LAUNCHER_SOURCE, launcher_path(str(tools_dir)))
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise KimiInstallError(f"Kimi CLI reports {found!r} after install, expected {CLI_VERSION}")
