"""Where the pinned mini-swe-agent lives under the tools folder, and how it gets there.

mini-swe-agent is a Python library (PyPI `mini-swe-agent`). It gets a virtual environment of
its own, made with Debian's `/usr/bin/python3` (inside a sandbox only `/usr` is visible, and a
venv's `bin/python` is a link to the interpreter it was made with, so the same venv runs on
the host and at `/opt/uhp-tools` inside the sandbox). The sandbox runs `venv/bin/python
<driver>`: the driver (driver.py, copied beside the venv) uses its Python API.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from harness_bases.installing import reported_version, run_install_command

PACKAGE = "mini-swe-agent"
CLI_VERSION = "2.4.6"
# The driver calls the gateway with the OpenAI SDK (litellm's own dependency, named here
# because the driver imports it itself).
REQUIREMENTS = (f"{PACKAGE}=={CLI_VERSION}", "openai>=1.40")
SYSTEM_PYTHON = "/usr/bin/python3"
DRIVER_NAME = "uhp_mini_driver.py"
DRIVER_SOURCE = Path(__file__).with_name("driver.py")
VERSION_TIMEOUT = 120.0
INSTALL_TIMEOUT = 900.0
# Quiet: mini-swe-agent prints no banner, and a failed model call is tried at most 3 times.
QUIET_ENV = {
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_COST_TRACKING": "ignore_errors",
    "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "3",
}


class MiniSweAgentInstallError(RuntimeError):
    """The pinned mini-swe-agent could not be installed or does not run."""


def prefix(tools_root: str) -> str:
    """This version's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / "mini-swe-agent" / CLI_VERSION)


def python_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/venv/bin/python"


def driver_path(tools_root: str) -> str:
    return f"{prefix(tools_root)}/{DRIVER_NAME}"


def _driver_current(tools_dir: Path) -> bool:
    installed = Path(driver_path(str(tools_dir)))
    return installed.is_file() and installed.read_bytes() == DRIVER_SOURCE.read_bytes()


def installed_version(tools_dir: Path) -> str | None:
    """The version the driver reports once mini-swe-agent's agent and model import, or None
    when it is missing, stale or does not run."""
    python = Path(python_path(str(tools_dir)))
    if not python.exists() or not _driver_current(tools_dir):
        return None
    return reported_version(
        [str(python), driver_path(str(tools_dir)), "--version"],
        timeout=VERSION_TIMEOUT,
        extra_env={**QUIET_ENV, "MSWEA_GLOBAL_CONFIG_DIR": "/tmp/uhp-mini-version"},
        exact=True,
    )


def _run(command: list[str], what: str) -> None:
    run_install_command(
        command,
        timeout=INSTALL_TIMEOUT,
        error=MiniSweAgentInstallError,
        cannot_start=f"could not {what}",
        failed=f"could not {what}",
    )


def install(tools_dir: Path) -> None:
    """Install the pinned mini-swe-agent into its own venv under tools_dir unless it runs."""
    if installed_version(tools_dir) == CLI_VERSION:
        return
    root = Path(prefix(str(tools_dir)))
    venv = root / "venv"
    if not Path(python_path(str(tools_dir))).exists():
        root.mkdir(parents=True, exist_ok=True)
        _run([SYSTEM_PYTHON, "-m", "venv", str(venv)], "create a venv with /usr/bin/python3")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-input"]
    _run([*pip, "--disable-pip-version-check", *REQUIREMENTS], f"pip-install {PACKAGE}")
    shutil.copyfile(DRIVER_SOURCE, driver_path(str(tools_dir)))
    found = installed_version(tools_dir)
    if found != CLI_VERSION:
        raise MiniSweAgentInstallError(
            f"mini-swe-agent reports {found!r} after install, expected {CLI_VERSION}"
        )
