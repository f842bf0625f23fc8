"""The engine's runtime for agent containers (UHP_DOCKER_RUNTIME): runc, or gVisor's runsc.

With `runsc`, every system call of the agent is served by gVisor's own kernel (the Sentry,
a user-space Go program), not the host's: the host kernel sees only the few calls the Sentry
makes, under gVisor's own seccomp filter. docs/gvisor.md says what that buys, what it costs
(bench/sandbox.py) and what differs inside (Debian bookworm's runsc, 2022-12-19).

The runtime is the engine's to register (/etc/docker/daemon.json; scripts/docker-engine.sh
does it for runsc, with --network=none, --host-uds=open for the gateway's socket and
--oci-seccomp for the profile below: docs/gvisor.md says why each). A server set to a
runtime that an engine lacks would fail every turn; it refuses that engine at once instead,
saying how to register it.
"""

from __future__ import annotations

import json
from typing import Any

from uhp_server.sandbox.base import SandboxError

GVISOR = "runsc"
# In gVisor the container's pids cgroup holds the Sentry's own host threads too (about 40
# idle, measured here) and the agent's processes only through them: under this limit the
# sandbox may not even start (64 failed here), and an agent that goes over its share ends
# the whole sandbox rather than seeing a fork fail.
GVISOR_MIN_PIDS = 128


def engine_runtimes(api: Any) -> set[str]:
    """The runtimes an engine has registered (`docker info`'s Runtimes)."""
    return set((api.info().get("Runtimes") or {}).keys())


# Inside gVisor, what the agent's syscalls reach is the Sentry, not the host's kernel. The
# Sentry still implements some of these itself (io_uring, user namespaces); this profile
# keeps them out of the agent's reach too (defence in depth, and the same answer as the runc
# sandbox's filter): runsc applies it inside the sandbox (--oci-seccomp,
# scripts/docker-engine.sh). It is a deny list over gVisor's own small syscall table, not
# Docker's default allow list: this runsc ignores a rule's errnoRet (every denial is EPERM),
# and Docker's profile relies on clone3 failing with ENOSYS, without which glibc does not
# fall back to clone and no thread starts.
GVISOR_DENIED = {
    # io_uring: a second way to make every syscall, around any filter of them.
    "io_uring_setup": "io_uring",
    "io_uring_enter": "io_uring",
    "io_uring_register": "io_uring",
    # The keyring: a store that outlives the process (issue 27's channel between principals).
    "add_key": "keyring",
    "keyctl": "keyring",
    "request_key": "keyring",
    "bpf": "eBPF programs",
    # New namespaces: a user namespace makes its creator root in it (unshare -Ur).
    "unshare": "namespaces",
    "setns": "namespaces",
}
CLONE_NEWUSER = 0x10000000
EPERM = 1


def gvisor_seccomp_profile() -> dict[str, Any]:
    """The seccomp profile of an agent container in gVisor (GVISOR_DENIED, and clone with a
    new user namespace)."""
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [
            {"names": sorted(GVISOR_DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": EPERM,
                "args": [
                    {
                        "index": 0,
                        "op": "SCMP_CMP_MASKED_EQ",
                        "value": CLONE_NEWUSER,
                        "valueTwo": CLONE_NEWUSER,
                    }
                ],
            },
        ],
    }


def security_options(runtime: str) -> list[str]:
    """What `runtime` adds to the container's security options: gVisor's profile."""
    if runtime != GVISOR:
        return []
    return ["seccomp=" + json.dumps(gvisor_seccomp_profile(), separators=(",", ":"))]


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
