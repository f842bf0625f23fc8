"""What a turn on an environment gets besides the read-only mount (Environments §6): the
environment's dependencies first in the agent's environment, and a note in its instructions.

Both are applied in one place, the executor, once the base has built the invocation from
nothing (`HarnessBase.prepare`): so every base gets them alike, and none knows of them.

A login shell (the way Codex runs its commands in the docker sandbox: `sh -lc`) reads
/etc/profile, whose Debian original sets PATH afresh; it then runs /etc/profile.d/*.sh. The
runtime image has one there (sandbox/docker/image/uhp-environment.sh) that puts the
environment's programs first again (`UHP_ENVIRONMENT_PATH`): the agent's shell runs the
project's dependencies whichever way its CLI starts it. (The local sandbox shows the host no
/etc/profile.)
"""

from __future__ import annotations

from pathlib import Path

from harness_bases.base import Invocation
from uhp_server.environments.mount import EnvironmentMount

# What an apt layer (`apt/` in the version) adds, when the build unpacked one: programs, and
# the libraries they load. Relative to the version's folder.
APT_PROGRAMS = ("apt/usr/local/bin", "apt/usr/bin", "apt/bin", "apt/usr/sbin", "apt/sbin")
APT_LIBRARIES = (
    "apt/usr/local/lib",
    "apt/usr/lib/x86_64-linux-gnu",
    "apt/usr/lib/aarch64-linux-gnu",
    "apt/lib/x86_64-linux-gnu",
    "apt/lib/aarch64-linux-gnu",
    "apt/usr/lib",
    "apt/lib",
)


def _joined(first: list[str], rest: str | None) -> str:
    return ":".join([*first, *([rest] if rest else [])])


def _present(mount: EnvironmentMount, relatives: tuple[str, ...]) -> list[str]:
    """The inside paths of those of `relatives` the version has (a stat each, on the host)."""
    return [f"{mount.mount}/{rel}" for rel in relatives if (mount.host_path / rel).is_dir()]


def environment_variables(mount: EnvironmentMount, env: dict[str, str]) -> dict[str, str]:
    """`env` with the environment's dependencies first, whatever the base put there: `PATH`
    begins with its virtual environment's and its node packages' programs (then its apt
    layer's), `PYTHONPATH` with the project, `NODE_PATH` with its node_modules,
    `LD_LIBRARY_PATH` with its apt libraries when it has some; `PROJECT_ROOT` is the mount."""
    root = mount.mount
    programs = [f"{root}/.venv/bin", f"{root}/node_modules/.bin", *_present(mount, APT_PROGRAMS)]
    result = dict(env)
    result["PATH"] = _joined(programs, env.get("PATH"))
    result["UHP_ENVIRONMENT_PATH"] = ":".join(programs)  # for a login shell (PROFILE)
    result["PYTHONPATH"] = _joined([root], env.get("PYTHONPATH"))
    result["NODE_PATH"] = _joined([f"{root}/node_modules"], env.get("NODE_PATH"))
    libraries = _present(mount, APT_LIBRARIES)
    if libraries:
        result["LD_LIBRARY_PATH"] = _joined(libraries, env.get("LD_LIBRARY_PATH"))
    if (mount.host_path / ".venv" / "bin").is_dir():
        result["VIRTUAL_ENV"] = f"{root}/.venv"
    result["PROJECT_ROOT"] = root
    return result


def with_environment(invocation: Invocation, mount: EnvironmentMount | None) -> Invocation:
    """The invocation as the sandbox starts it: on an environment, its variables applied."""
    if mount is None:
        return invocation
    env = environment_variables(mount, invocation.env)
    return Invocation(argv=invocation.argv, env=env, cwd=invocation.cwd)


def environment_instructions(mount: EnvironmentMount, workspace: str) -> str:
    """What the agent is told of the project (Environments §6.4)."""
    lines = [
        f"Project environment: the project's files are at {mount.mount} (also $PROJECT_ROOT),"
        " with its dependencies already installed: its Python virtual environment, node"
        " packages and system packages come first on PATH, PYTHONPATH and NODE_PATH, so run"
        " its scripts and tools as they are, without installing anything.",
        f"{mount.mount} is read-only and shared with other sessions: any write there fails."
        f" Write your files in your working directory, {workspace}, and nowhere else.",
    ]
    if mount.entry.strip():
        lines.append(f"How the owner runs the project: {mount.entry.strip()}")
    return "\n".join(lines)


def version_folder_missing(mount: EnvironmentMount) -> str | None:
    """Why the turn cannot mount its version (its folder is gone), or None when it can."""
    if Path(mount.host_path).is_dir():
        return None
    return (
        f"Version {mount.version} of the environment this session reads ({mount.environment_id})"
        " is no longer on this server. Start a new session to read its active version."
    )
