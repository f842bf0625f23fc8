"""What keeps a local sandbox's agent off the host: its uid and the /proc it sees.

A server running as root would otherwise run the agent as host uid 0. Without capabilities
that uid still writes every root-owned file it can reach, /proc/sys among them (kernel
settings such as core_pattern are mode 0644). So the agent runs as an unprivileged uid
(`UHP_LOCAL_SANDBOX_USER`; auto, under a root server: a uid of the principal's own,
sandbox/agent_user.py), and /proc's host-wide
entries are read-only or masked as Docker does, whatever the uid.

The uid switch: bubblewrap, running as root, would make a user namespace mapping only uid 0
(no other uid could be entered), so the sandbox gets the other namespaces without one and
keeps just the capabilities to change uid; `setpriv` changes it, empties every capability
set and execs the launcher. NoNewPrivs (set by bubblewrap) keeps it unprivileged after.
"""

from __future__ import annotations

import os
from pathlib import Path

# Read-only: kernel settings, triggers and host-wide hardware and filesystem tunables.
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi", "asound")
# Masked with /dev/null: kernel memory, other users' keys, timing side channels.
_PROC_MASKED = (
    "kcore",
    "keys",
    "key-users",
    "timer_list",
    "timer_stats",
    "latency_stats",
    "sched_debug",
    "kallsyms",
)


def switches_user(user: tuple[int, int]) -> bool:
    """True when the sandbox must change uid: the agent's is not the server's own."""
    return user != (os.getuid(), os.getgid())


def namespace_args(user: tuple[int, int]) -> list[str]:
    """bwrap's namespace and capability arguments for an agent running as `user`."""
    if not switches_user(user):  # unprivileged server: its own uid, in a user namespace
        return ["--unshare-all", "--cap-drop", "ALL"]
    return [
        # Every namespace but the user one (see the module docstring).
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        *("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"),
    ]


def switch_user_argv(user: tuple[int, int]) -> list[str]:
    """The prefix that runs the rest of the argv as `user` with no capabilities left."""
    if not switches_user(user):
        return []
    uid, gid = user
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


def proc_guard_args(proc: Path = Path("/proc")) -> list[str]:
    """bwrap arguments, after `--proc /proc`, that make /proc's host-wide entries read-only
    or mask them (only those this kernel has: bwrap fails on a missing bind source)."""
    args: list[str] = []
    for name in _PROC_READ_ONLY:
        if (proc / name).exists():
            args += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    for name in _PROC_MASKED:
        if (proc / name).exists():
            args += ["--ro-bind", "/dev/null", f"/proc/{name}"]
    return args


def mount_parent_args(args: list[str]) -> list[str]:
    """`--dir` arguments, mode 0755, for every folder bwrap would otherwise make as root
    with mode 0700 on the way to a mount point (/etc, /home, /opt, /run): an agent that is
    not root could not pass them. To go before `args`, whose binds they are read from."""
    parents: list[str] = []
    for option, _source, dest in zip(args, args[1:], args[2:], strict=False):
        if option not in ("--bind", "--ro-bind"):
            continue
        for parent in reversed(Path(dest).parents):
            text = str(parent)
            if text != "/" and text not in parents:
                parents.append(text)
    out: list[str] = []
    for folder in parents:
        out += ["--perms", "0755", "--dir", folder]
    return out
