"""The pinned Gemini CLI under the tools folder.

Gemini CLI (`@google/gemini-cli`, npm) 0.61.0 is one bundled node program (node >= 20): it
runs on the pinned node of `harness_bases/node_runtime.py`, started as
`<node> <bundle/gemini.js>`.
"""

from __future__ import annotations

from harness_bases.node_runtime import NodeCli

# One process: no relaunch of itself with a bigger heap (it would double the start-up).
NO_RELAUNCH = {"GEMINI_CLI_NO_RELAUNCH": "true"}


class GeminiCliInstallError(RuntimeError):
    """The pinned Gemini CLI could not be installed or does not run."""


CLI = NodeCli(
    label="Gemini CLI",
    package="@google/gemini-cli",
    version="0.61.0",
    folder="gemini-cli",
    entry="bundle/gemini.js",
    error=GeminiCliInstallError,
    version_env=NO_RELAUNCH,
    version_timeout=60.0,
)
CLI_VERSION = CLI.version
PACKAGE = CLI.package
command = CLI.command
installed_version = CLI.installed_version
install = CLI.install
