"""Where the pinned OpenHands CLI lives under the tools folder, and how it gets there.

OpenHands CLI (PyPI `openhands`) needs Python >= 3.12, newer than Debian bookworm's: it is
pip-installed into a private copy of a host CPython of its own (harness_bases/python_runtime.py),
and started as `<copy>/bin/python3 <launcher>`: the launcher (acp_launcher.py, copied next to
the copy) sets up its ACP server for an unattended client and serves it on stdio.
"""

from __future__ import annotations

from pathlib import Path

from harness_bases.python_runtime import LaunchedCli, PythonCli

CLI_VERSION = "1.16.0"
PACKAGE = "openhands"


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
LAUNCHED = LaunchedCli(CLI, Path(__file__).with_name("acp_launcher.py"))
command = LAUNCHED.command
installed_version = LAUNCHED.installed_version
install = LAUNCHED.install
