"""The steps every base's installer takes: run an install command with a timeout, npm-install
a pinned package into a prefix, read the version an installed program reports, and take turns
at a folder several installs share.

What is installed where, and what counts as installed, stays in each base's install.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import platform
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

# A version check runs with an environment built from nothing, as the sandbox would run it.
VERSION_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
_VERSION = r"(\d+\.\d+\.\d+\S*)"
# platform.machine()'s spellings -> the word npm's per-platform packages use (`x64`, `arm64`)
_NPM_ARCHES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


def npm_arch(machine: str | None, *, program: str, error: type[Exception]) -> str:
    """npm's name for this machine's architecture (or `machine`'s), as in the per-platform
    packages the npm-installed CLIs ship their native builds in (`opencode-linux-x64`).
    Raises `error` naming `program` when there is no Linux build for it."""
    arch = (machine or platform.machine()).lower()
    try:
        return _NPM_ARCHES[arch]
    except KeyError:
        raise error(f"{program} has no Linux build for machine type {arch!r}") from None


def parse_version(text: str, *, exact: bool = False) -> str | None:
    """The first `x.y.z…` version in text; with `exact`, text must be the version alone
    (blank space around it aside), so that a warning printed instead is not taken for one."""
    match = re.fullmatch(rf"\s*{_VERSION}\s*", text) if exact else re.search(_VERSION, text)
    return match.group(1) if match else None


def reported_version(
    argv: list[str],
    *,
    timeout: float,
    extra_env: Mapping[str, str] | None = None,
    exact: bool = False,
    also_stderr: bool = False,
) -> str | None:
    """The version `argv` (a program and its version flag) prints, or None when it does not
    start, fails, times out or prints none. `also_stderr`: for programs that print it there."""
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**VERSION_ENV, **(extra_env or {})},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    return parse_version(result.stdout + (result.stderr if also_stderr else ""), exact=exact)


@contextlib.contextmanager
def held_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created when missing) until the block ends: installs that
    share a folder (the pinned node) take turns, in threads or processes alike."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_install_command(
    command: list[str],
    *,
    timeout: float,
    error: type[Exception],
    cannot_start: str,
    failed: str,
) -> None:
    """Run one install step. Raises `error("<cannot_start>: <why>")` when it cannot run and
    `error("<failed>: <the end of its output>")` when it exits non-zero."""
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise error(f"{cannot_start}: {exc}") from exc
    if result.returncode != 0:
        tail = (result.stderr or result.stdout)[-2000:]
        raise error(f"{failed}: {tail}")


def npm_install(
    prefix: Path,
    package: str,
    version: str,
    *,
    label: str,
    timeout: float,
    error: type[Exception],
) -> None:
    """npm-install package@version into prefix (created when missing). npm's exit status
    says little (it skips a platform package quietly): the caller checks what runs."""
    prefix.mkdir(parents=True, exist_ok=True)
    command = ["npm", "install", "--prefix", str(prefix), "--no-fund", "--no-audit"]
    command.append(f"{package}@{version}")
    run_install_command(
        command,
        timeout=timeout,
        error=error,
        cannot_start=f"could not run npm to install {label}",
        failed=f"npm install of {package}@{version} failed",
    )
