"""Where the pinned Codex CLI lives under the tools folder, and how it gets there.

The npm package `@openai/codex` is only a node launcher; the real program is a static
(musl) binary in a per-platform optional dependency. We run that binary directly: no node
needed inside the sandbox, and start-up is faster.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from harness_bases.installing import npm_arch, npm_install, reported_version

CLI_VERSION = "0.169.0"
PACKAGE = "@openai/codex"
VERSION_TIMEOUT = 10.0
INSTALL_TIMEOUT = 600.0

# npm's architecture -> the Rust target triple of the binary its platform package holds
_TRIPLES = {"x64": "x86_64-unknown-linux-musl", "arm64": "aarch64-unknown-linux-musl"}


class CodexInstallError(RuntimeError):
    """The pinned Codex CLI could not be installed or does not run."""


def _platform(machine: str | None = None) -> tuple[str, str]:
    """(npm platform package, Rust target triple) for this machine."""
    arch = npm_arch(machine, program="Codex", error=CodexInstallError)
    return f"codex-linux-{arch}", _TRIPLES[arch]


def vendor_dir(tools_root: str, machine: str | None = None) -> str:
    """The vendor folder (binary and helper tools) under a tools root, as a POSIX path.

    Works for the sandbox's view (`paths.tools`) and the host's (`host_tools`) alike."""
    package, triple = _platform(machine)
    prefix = PurePosixPath(tools_root) / "codex" / CLI_VERSION
    return str(prefix / "node_modules" / "@openai" / package / "vendor" / triple)


def binary_path(tools_root: str, machine: str | None = None) -> str:
    return f"{vendor_dir(tools_root, machine)}/bin/codex"


def helper_path_dir(tools_root: str, machine: str | None = None) -> str:
    """The folder with the bundled `rg`, which Codex's tools expect on PATH."""
    return f"{vendor_dir(tools_root, machine)}/codex-path"


def installed_version(tools_dir: Path) -> str | None:
    """What the installed binary reports with --version, or None if it does not run."""
    binary = Path(binary_path(str(tools_dir)))
    if not binary.is_file():
        return None
    return reported_version([str(binary), "--version"], timeout=VERSION_TIMEOUT)


def install(tools_dir: Path) -> None:
    """npm-install the pinned CLI under tools_dir/codex/<version> unless it already runs."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    prefix = tools_dir / "codex" / CLI_VERSION
    npm_install(
        prefix,
        PACKAGE,
        CLI_VERSION,
        label="Codex",
        timeout=INSTALL_TIMEOUT,
        error=CodexInstallError,
    )
    # npm exits 0 even when it skipped the platform package; only a running binary counts.
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise CodexInstallError(
            f"Codex binary at {binary_path(str(tools_dir))} reports {found!r}, "
            f"expected {CLI_VERSION}"
        )
