"""Where the pinned OpenHands CLI lives under the tools folder, and how it gets there.

OpenHands CLI (PyPI `openhands`) needs Python >= 3.12, newer than Debian bookworm's: it is
pip-installed into a private copy of a host CPython of its own (harness_bases/python_runtime.py),
and started as `<copy>/bin/python3 <launcher>`: the launcher (acp_launcher.py, copied next to
the copy) sets up its ACP server for an unattended client and serves it on stdio.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness_bases.installing import reported_version
from harness_bases.python_runtime import PythonCli
from harness_bases.python_start import python_argv

CLI_VERSION = "1.16.0"
PACKAGE = "openhands"
LAUNCHER_NAME = "uhp_acp_launcher.py"
LAUNCHER_SOURCE = Path(__file__).with_name("acp_launcher.py")
VERSION_TIMEOUT = 60.0


class OpenHandsInstallError(RuntimeError):
    """The pinned OpenHands CLI could not be installed or does not run."""


# pip's own record of what it installed into the copy: the CLI's entry point would import the
# whole agent (about 6 CPU-seconds) just to print it. The launcher's --version below is what
# counts as installed.
CLI = PythonCli(
    label="OpenHands CLI",
    requirements=(f"{PACKAGE}=={CLI_VERSION}",),
    version=CLI_VERSION,
    folder="openhands",
    module="pip",
    error=OpenHandsInstallError,
    version_args=("show", PACKAGE),
    python_below=(3, 13),  # its Requires-Python is ==3.12.*
)


def python_path(tools_root: str) -> str:
    return CLI.python_path(tools_root)


def launcher_path(tools_root: str) -> str:
    return f"{CLI.prefix(tools_root)}/{LAUNCHER_NAME}"


def command(tools_root: str) -> list[str]:
    return python_argv(python_path(tools_root), launcher_path(tools_root))


def _launcher_current(tools_dir: Path) -> bool:
    installed = Path(launcher_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == LAUNCHER_SOURCE.read_bytes()


def installed_version(tools_dir: Path) -> str | None:
    """The version the launcher reports on the private Python (once it finds the CLI's ACP
    server), or None when it is missing, stale or does not run."""
    if not Path(python_path(str(tools_dir))).is_file() or not _launcher_current(tools_dir):
        return None
    return reported_version(
        [*command(str(tools_dir)), "--version"],
        timeout=VERSION_TIMEOUT,
        extra_env={"HOME": "/nonexistent"},
        exact=True,  # the version alone; anything else is a failure
    )


def install(tools_dir: Path) -> None:
    """Copy a host CPython >= 3.12 under tools_dir and pip-install the pinned CLI into it,
    unless it already runs; then put the launcher next to it."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    CLI.install(tools_dir)
    shutil.copyfile(LAUNCHER_SOURCE, launcher_path(str(tools_dir)))
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise OpenHandsInstallError(
            f"OpenHands CLI reports {found!r} after install, expected {CLI_VERSION}"
        )
