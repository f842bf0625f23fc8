"""The engine's runtime for agent containers (UHP_DOCKER_RUNTIME): runc, or gVisor's runsc.

With `runsc`, every system call of the agent is served by gVisor's own kernel (the Sentry,
a user-space Go program), not the host's: the host kernel sees only the few calls the Sentry
makes, under gVisor's own seccomp filter. docs/gvisor.md says what that buys, what it costs
(bench/sandbox.py) and what differs inside (Debian bookworm's runsc, 2022-12-19).

The runtime is the engine's to register (/etc/docker/daemon.json; scripts/docker-engine.sh
does it for runsc, with --network=none, --host-uds=open for the gateway's socket and
--oci-seccomp for the syscall filter's gVisor profile, sandbox/syscall_filter.py:
docs/gvisor.md says why each). A server set to a runtime that an engine lacks would fail
every turn; it refuses that engine at once instead, saying how to register it. It refuses
a `runsc` registered without the flags the server relies on too: without --oci-seccomp,
runsc ignores the container's seccomp profile and the agent would run with no syscall
filter, silently; without --host-uds=open, the agent cannot reach the gateway's socket.
"""

from __future__ import annotations

from typing import Any

from uhp_server.sandbox.base import SandboxError

GVISOR = "runsc"
# In gVisor the container's pids cgroup holds the Sentry's own host threads too (about 40
# idle, measured here) and the agent's processes only through them: under this limit the
# sandbox may not even start (64 failed here), and an agent that goes over its share ends
# the whole sandbox rather than seeing a fork fail.
GVISOR_MIN_PIDS = 128
# What the server needs of runsc's registration (scripts/docker-engine.sh passes both).
# Each flag with the values that do: a flag given twice counts as its last (runsc's own rule).
GVISOR_REQUIRED_ARGS = {"--oci-seccomp": ("", "true"), "--host-uds": ("open", "all")}


def engine_runtimes(api: Any) -> dict[str, Any]:
    """The runtimes an engine has registered (`docker info`'s Runtimes: name → {"path",
    "runtimeArgs"})."""
    return dict(api.info().get("Runtimes") or {})


def _missing_args(registered: Any) -> list[str]:
    """The flags runsc needs that its registration does not pass."""
    args = registered.get("runtimeArgs") if isinstance(registered, dict) else None
    given: dict[str, str] = {}
    for arg in args or ():
        flag, _, value = str(arg).partition("=")
        given[flag] = value
    return [
        f"{flag}={values[0]}" if values[0] else flag
        for flag, values in GVISOR_REQUIRED_ARGS.items()
        if given.get(flag) not in values
    ]


def check_limits(runtime: str, pids: int) -> None:
    """Raise SandboxError for a pids limit the runtime cannot start a sandbox under."""
    if runtime == GVISOR and pids < GVISOR_MIN_PIDS:
        raise SandboxError(
            f"UHP_DOCKER_PIDS_LIMIT={pids} is too small for gVisor: its own kernel's threads "
            f"count against it; give it at least {GVISOR_MIN_PIDS} (docs/gvisor.md)"
        )


def check_runtime(api: Any, runtime: str, engine: str) -> None:
    """Raise SandboxError when `runtime` (empty: the engine's default) is not registered."""
    if not runtime:
        return
    have = engine_runtimes(api)
    if runtime in have:
        missing = _missing_args(have[runtime]) if runtime == GVISOR else []
        if missing:
            raise SandboxError(
                f"UHP_DOCKER_RUNTIME={runtime}, but the docker engine {engine} registers it "
                f"without {' '.join(missing)} (--oci-seccomp: else no syscall filter applies; "
                "--host-uds=open: else the agent cannot reach the gateway's socket); "
                "register it again: bash scripts/docker-engine.sh"
            )
        return
    how = (
        "install gVisor (apt-get install runsc) and register it: bash scripts/docker-engine.sh "
        "(adds it to /etc/docker/daemon.json and reloads the engine)"
        if runtime == GVISOR
        else "register it in the engine's daemon.json `runtimes` and reload the engine"
    )
    raise SandboxError(
        f"UHP_DOCKER_RUNTIME={runtime}, but the docker engine {engine} has no runtime of that "
        f"name (it has: {', '.join(sorted(have)) or 'none'}); {how}"
    )
