"""harness_bases/python_start.py: a turn's Python never runs what the session's home planted in
its user site-packages (a `usercustomize.py` there would see the turn's credentials)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness_bases.python_start import python_argv

PYTHON = "/usr/bin/python3"  # Debian's: what Hermes', mini-swe-agent's and Copilot's turns run


def plant_usercustomize(home: Path) -> Path:
    """A usercustomize.py in `home`'s user site that writes a marker when imported."""
    version = subprocess.run(
        [PYTHON, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site = home / ".local" / "lib" / f"python{version}" / "site-packages"
    site.mkdir(parents=True)
    marker = home / "planted-code-ran"
    (site / "usercustomize.py").write_text(f"open({str(marker)!r}, 'w').write('token seen')\n")
    return marker


def run(argv: list[str], home: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "UHP_GATEWAY_TOKEN": "uhpgw_secret"}
    subprocess.run(argv, env=env, check=True, timeout=60)


def test_a_turns_python_leaves_the_homes_user_site_out(tmp_path: Path) -> None:
    marker = plant_usercustomize(tmp_path)
    run(python_argv(PYTHON, "-c", "pass"), tmp_path)
    assert not marker.exists()


def test_without_it_the_planted_code_would_run(tmp_path: Path) -> None:
    """The control: the same interpreter and home, started plainly, runs the planted file."""
    marker = plant_usercustomize(tmp_path)
    run([PYTHON, "-c", "pass"], tmp_path)
    assert marker.read_text() == "token seen"


def test_the_interpreters_own_site_packages_stay(tmp_path: Path) -> None:
    done = subprocess.run(
        [*python_argv(sys.executable, "-c", "import pytest; print('ok')")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "ok"
