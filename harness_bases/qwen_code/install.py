"""The pinned Qwen Code under the tools folder.

Qwen Code (`@qwen-code/qwen-code`, npm) 0.24.4 needs node >= 22: it runs on the pinned node
of `harness_bases/node_runtime.py`, started as `<node> <cli-entry.js>`.
"""

from __future__ import annotations

from harness_bases.node_runtime import NodeCli


class QwenCodeInstallError(RuntimeError):
    """The pinned Qwen Code could not be installed or does not run."""


CLI = NodeCli(
    label="Qwen Code",
    package="@qwen-code/qwen-code",
    version="0.24.4",
    folder="qwen-code",
    entry="cli-entry.js",
    error=QwenCodeInstallError,
    version_env={"QWEN_CODE_NO_RELAUNCH": "true"},
)
CLI_VERSION = CLI.version
PACKAGE = CLI.package
command = CLI.command
installed_version = CLI.installed_version
install = CLI.install
