"""Where the pinned Hermes Agent lives under the tools folder, and how it gets there.

Hermes is a Python program (PyPI `hermes-agent`). It gets a virtual environment of its own,
made with Debian's `/usr/bin/python3`: inside a sandbox only `/usr` is visible, and a venv's
`bin/python` is a symlink to the interpreter it was made with, so the same venv runs on the
host and at `/opt/uhp-tools` inside the sandbox (Python finds the venv from the path it was
started by, not from where the link points). The console scripts in `venv/bin` carry the
host path in their shebang, so nothing is started through them: the sandbox runs
`venv/bin/python <launcher>`.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from harness_bases.installing import reported_version, run_install_command

CLI_VERSION = "0.19.0"
# The `acp` extra brings Hermes' ACP server; `mcp` its MCP client. mcp 2 removed the HTTP
# client Hermes uses, which would silently drop every remote MCP server.
REQUIREMENTS = (f"hermes-agent[acp,mcp]=={CLI_VERSION}", "mcp<2")
SYSTEM_PYTHON = "/usr/bin/python3"
LAUNCHER_NAME = "uhp_acp_launcher.py"
LAUNCHER_SOURCE = Path(__file__).with_name("acp_launcher.py")
VERSION_TIMEOUT = 60.0
INSTALL_TIMEOUT = 900.0


class HermesInstallError(RuntimeError):
    """The pinned Hermes Agent could not be installed or does not run."""


def prefix(tools_root: str) -> str:
    """This version's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / "hermes" / CLI_VERSION)


def python_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/venv/bin/python"


def launcher_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/{LAUNCHER_NAME}"


def _launcher_current(tools_dir: Path) -> bool:
    installed = Path(launcher_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == LAUNCHER_SOURCE.read_bytes()


def installed_version(tools_dir: Path) -> str | None:
    """The version the installed Hermes reports through our launcher (which imports its ACP
    server), or None when it is missing, stale or does not run."""
    python = Path(python_path(str(tools_dir)))
    if not python.exists() or not _launcher_current(tools_dir):
        return None
    return reported_version(
        [str(python), launcher_path(str(tools_dir)), "--version"],
        timeout=VERSION_TIMEOUT,
        extra_env={"HERMES_DISABLE_LAZY_INSTALLS": "1"},
        exact=True,  # the launcher prints the version alone; anything else is a failure
    )


def _run(command: list[str], what: str) -> None:
    run_install_command(
        command,
        timeout=INSTALL_TIMEOUT,
        error=HermesInstallError,
        cannot_start=f"could not {what}",
        failed=f"could not {what}",
    )


def install(tools_dir: Path) -> None:
    """Install the pinned Hermes into its own venv under tools_dir unless it already runs."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    root = Path(prefix(str(tools_dir)))
    venv = root / "venv"
    if not Path(python_path(str(tools_dir))).exists():
        root.mkdir(parents=True, exist_ok=True)
        # Debian splits venv/ensurepip into python3-venv (scripts/install.sh installs it).
        _run([SYSTEM_PYTHON, "-m", "venv", str(venv)], "create a venv with /usr/bin/python3")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-input"]
    _run([*pip, "--disable-pip-version-check", *REQUIREMENTS], "pip-install hermes-agent")
    shutil.copyfile(LAUNCHER_SOURCE, launcher_path(str(tools_dir)))
    # pip exits 0 after installing something that cannot start; only a running launcher counts.
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise HermesInstallError(f"Hermes reports {found!r} after install, expected {CLI_VERSION}")
