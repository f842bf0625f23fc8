"""What one agent container is: the image, the mounts, the hardening, the labels.

Kept as plain data (the keyword arguments of the SDK's create_container) so that every
hardening option is visible in one place and checked by a unit test as well as a live one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness_bases.base import Invocation, SandboxPaths
from uhp_server.sandbox import syscall_filter
from uhp_server.sandbox.agent_user import AgentUsers, parse_user
from uhp_server.sandbox.docker.gateway_socket import INSIDE_DIR
from uhp_server.sandbox.docker.runtimes import GVISOR

GATEWAY_PORT = 8080  # the gateway inside the container: 127.0.0.1:8080 (its own loopback)
LAUNCHER = "/usr/local/bin/uhp-launch"  # from the runtime image (image/launch.sh)
HOSTNAME = "uhp-sandbox"

# Labels on every agent container: the server that owns it (reaped at its next start), and
# what it runs for (for an operator reading `docker ps`).
LABEL_SERVER = "uhp.server"
LABEL_SESSION = "uhp.session"
LABEL_RESPONSE = "uhp.response"
# A ready pool's container (ready_pool.py), before its turn: created ahead, it cannot carry
# its turn's session and response: it is renamed uhp-<response id> once its turn starts.
LABEL_SLOT = "uhp.slot"
# A ready container's name until its turn starts; then it is renamed uhp-<response id>.
SLOT_NAME_PREFIX = "uhp-slot-"


@dataclass(frozen=True)
class Limits:
    """Per-container resource limits (UHP_DOCKER_MEMORY, _CPUS, _PIDS_LIMIT, _TMP_SIZE)."""

    memory: str = "4g"
    cpus: float = 2.0
    pids: int = 512
    tmp_size: str = "512m"


@dataclass(frozen=True)
class HostMounts:
    """Host paths (as the Docker daemon sees them) of what the container mounts."""

    workspace: str
    home: str
    tools: str
    gateway_dir: str  # the gateway socket's folder
    resolv_conf: str  # a resolver config with no nameserver
    # Files mounted read-only: their host path -> the path in the container (the agent's
    # own /etc/passwd and /etc/group, agent_user.account_files).
    files: Mapping[str, str] = field(default_factory=dict)
    # Further folders (SessionMounts.extra): host path, path in the container, writable.
    extra: tuple[tuple[str, str, bool], ...] = ()
    # A ready pool's slot (ready_pool.py): workspace, home and tools are empty folders on a
    # shared mount, bound `rslave` so the turn's overlays, mounted on them once the turn is
    # bound to the slot, appear in the running container.
    follow_mounts: bool = False


def resolve_user(setting: str) -> tuple[int, int]:
    """uid and gid an agent with no principal's number runs as: never root
    (sandbox/agent_user.py; the sandbox hands the folders to it)."""
    return AgentUsers(parse_user(setting, "UHP_DOCKER_USER")).default


def create_kwargs(
    *,
    image: str,
    invocation: Invocation,
    user: tuple[int, int],
    labels: Mapping[str, str],
    host_config: Any,
) -> dict[str, Any]:
    """Keyword arguments for APIClient.create_container (host_config from host_config_kwargs)."""
    return {
        "image": image,
        "command": [LAUNCHER, str(GATEWAY_PORT), *invocation.argv],
        "environment": dict(invocation.env),  # built from nothing by the base
        "working_dir": invocation.cwd,
        "user": f"{user[0]}:{user[1]}",
        "hostname": HOSTNAME,
        "labels": dict(labels),
        # stdin is the CLI's JSON-RPC pipe. Not detached with stdin open, the SDK also sets
        # StdinOnce: when our attach goes away (the turn closed it, or the server died) the
        # CLI reads end-of-file and exits.
        "stdin_open": True,
        "detach": False,
        "tty": False,
        "host_config": host_config,
    }


@functools.cache
def seccomp_option(gvisor: bool = False) -> str:
    """The `--security-opt seccomp=…` of every container: the syscall filter of
    sandbox/syscall_filter.py (the API takes the profile's JSON itself, which is what the
    docker CLI sends for a file), in place of the engine's default profile. `gvisor`: the
    container runs on runsc (see docker_profile)."""
    profile = syscall_filter.docker_profile(gvisor=gvisor)
    return "seccomp=" + json.dumps(profile, separators=(",", ":"))


def host_config_kwargs(
    mounts: HostMounts, paths: SandboxPaths, limits: Limits, runtime: str = ""
) -> dict[str, Any]:
    """Keyword arguments for APIClient.create_host_config: the hardening, in one place.
    `runtime`: the engine's runtime (runtimes.py); empty, the engine's default."""
    follow = ",rslave" if mounts.follow_mounts else ""
    return {
        "runtime": runtime or None,
        "binds": {
            mounts.workspace: {"bind": paths.workspace, "mode": "rw" + follow},
            mounts.home: {"bind": paths.home, "mode": "rw" + follow},
            mounts.tools: {"bind": paths.tools, "mode": "ro" + follow},
            mounts.gateway_dir: {"bind": INSIDE_DIR, "mode": "ro"},
            mounts.resolv_conf: {"bind": "/etc/resolv.conf", "mode": "ro"},
            **{host: {"bind": inside, "mode": "ro"} for host, inside in mounts.files.items()},
            **{
                host: {"bind": inside, "mode": "rw" if writable else "ro"}
                for host, inside, writable in mounts.extra
            },
        },
        "network_mode": "none",  # loopback only: no route, no DNS (the gateway is a socket)
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={limits.tmp_size},mode=1777"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges", seccomp_option(gvisor=runtime == GVISOR)],
        "pids_limit": limits.pids,
        "mem_limit": limits.memory,
        "memswap_limit": limits.memory,  # equal to the memory limit: no swap on top
        "nano_cpus": int(limits.cpus * 1e9),
        "init": True,  # a real PID 1 reaps the agent's orphans and forwards signals
        "auto_remove": True,  # an exited container leaves nothing behind
        "ipc_mode": "private",
        # Nothing of the agent's output is stored by the engine: we read it from the attach.
        "log_config": {"type": "none", "config": {}},
    }
