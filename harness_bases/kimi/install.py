"""Where the pinned Kimi CLI lives under the tools folder, and how it gets there.

Kimi CLI (PyPI `kimi-cli`) needs Python >= 3.12: it is pip-installed into a private copy of a
host CPython under the tools folder (harness_bases/python_runtime.py). 1.51.0 is the last
release that runs: 1.52.0 turned every entry point into a deprecation notice pointing at its
TypeScript successor (and, without arguments, into a download of that successor's installer).
It is started through our launcher (acp_launcher.py, copied next to the copy), never through
the console script pip writes (whose shebang names the host path).
"""

from __future__ import annotations

from pathlib import Path

from harness_bases.python_runtime import LaunchedCli, PythonCli

CLI_VERSION = "1.51.0"
PACKAGE = "kimi-cli"


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
LAUNCHED = LaunchedCli(CLI, Path(__file__).with_name("acp_launcher.py"))
command = LAUNCHED.command
installed_version = LAUNCHED.installed_version
install = LAUNCHED.install
