"""Where the pinned Claude Code CLI lives under the tools folder, and how it gets there.

The npm package `@anthropic-ai/claude-code` is a launcher whose postinstall script copies a
native (Bun-compiled) binary out of a per-platform optional dependency. We run the binary
in the platform package directly: no node needed inside the sandbox, and nothing depends
on npm having run install scripts.

Next to it goes the shell prefix (`SHELL_PREFIX`): Claude Code runs every Bash tool
command through it, and it drops the agent's credentials from the command's environment.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from harness_bases.installing import npm_arch, npm_install, reported_version

CLI_VERSION = "2.1.328"
PACKAGE = "@anthropic-ai/claude-code"
VERSION_TIMEOUT = 10.0
INSTALL_TIMEOUT = 600.0
SHELL_PREFIX_NAME = "uhp-shell-prefix"

# Claude Code starts each Bash tool command as `<prefix> <script>`. The CLI itself needs
# the gateway token (and MCP tokens) in its environment; the commands it runs for the agent
# must not inherit them, so the prefix unsets them before handing the script to bash.
SHELL_PREFIX = """#!/bin/sh
# Installed by uhp-server: tool commands never inherit the agent's credentials.
unset ANTHROPIC_AUTH_TOKEN ANTHROPIC_API_KEY
for name in $(env | sed -n 's/^\\(UHP_[A-Za-z0-9_]*\\)=.*/\\1/p'); do
  unset "$name"
done
exec /bin/bash -c "$@"
"""


class ClaudeCodeInstallError(RuntimeError):
    """The pinned Claude Code CLI could not be installed or does not run."""


def prefix(tools_root: str) -> str:
    """This version's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / "claude-code" / CLI_VERSION)


def _arch(machine: str | None = None) -> str:
    return npm_arch(machine, program="Claude Code", error=ClaudeCodeInstallError)


def platform_packages(machine: str | None = None) -> tuple[str, str]:
    """The glibc and musl platform packages for this machine, in that order (npm installs
    the one matching the host's C library)."""
    name = f"claude-code-linux-{_arch(machine)}"
    return name, f"{name}-musl"


def binary_path(tools_root: str, host_tools: Path | None = None, machine: str | None = None) -> str:
    """The native binary under tools_root. `host_tools` (the same folder on the host) picks
    the platform package npm really installed; without it, the glibc one."""
    glibc, musl = platform_packages(machine)
    chosen = glibc
    if host_tools is not None:
        on_host = str(host_tools)
        missing = not Path(_package_binary(on_host, glibc)).exists()
        if missing and Path(_package_binary(on_host, musl)).exists():
            chosen = musl
    return _package_binary(tools_root, chosen)


def _package_binary(tools_root: str, package: str) -> str:
    return f"{prefix(tools_root)}/node_modules/@anthropic-ai/{package}/claude"


def shell_prefix_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/{SHELL_PREFIX_NAME}"


def _shell_prefix_current(tools_dir: Path) -> bool:
    path = Path(shell_prefix_path(str(tools_dir)))
    return (
        path.is_file()
        and os.access(path, os.X_OK)
        and path.read_text(encoding="utf-8") == SHELL_PREFIX
    )


def _write_shell_prefix(tools_dir: Path) -> None:
    path = Path(shell_prefix_path(str(tools_dir)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SHELL_PREFIX, encoding="utf-8")
    path.chmod(0o755)


def _binary_version(tools_dir: Path) -> str | None:
    binary = Path(binary_path(str(tools_dir), tools_dir))
    if not binary.is_file():
        return None
    return reported_version(
        [str(binary), "--version"],
        timeout=VERSION_TIMEOUT,
        extra_env={"DISABLE_AUTOUPDATER": "1"},
    )


def installed_version(tools_dir: Path) -> str | None:
    """What the installed binary reports with --version, or None when it is missing, does
    not run, or its shell prefix is missing or stale."""
    if not _shell_prefix_current(tools_dir):
        return None
    return _binary_version(tools_dir)


def install(tools_dir: Path) -> None:
    """npm-install the pinned CLI under tools_dir/claude-code/<version> unless it already
    runs, and (re)write its shell prefix."""
    if _binary_version(tools_dir) != CLI_VERSION:
        _npm_install(tools_dir)
    _write_shell_prefix(tools_dir)
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise ClaudeCodeInstallError(
            f"Claude Code at {binary_path(str(tools_dir), tools_dir)} reports {found!r}, "
            f"expected {CLI_VERSION}"
        )


def _npm_install(tools_dir: Path) -> None:
    npm_install(
        Path(prefix(str(tools_dir))),
        PACKAGE,
        CLI_VERSION,
        label="Claude Code",
        timeout=INSTALL_TIMEOUT,
        error=ClaudeCodeInstallError,
    )
