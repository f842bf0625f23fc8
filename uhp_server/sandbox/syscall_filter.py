"""What a sandboxed agent may ask of the kernel: the one list both sandboxes' syscall filters
come from (the local sandbox compiles it to BPF for bubblewrap, local/seccomp.py; the docker
sandbox hands it to the engine as a seccomp profile, docker_profile below).

The filter is an allow-list, as Docker's default profile is: whatever is not allowed here
answers EPERM (clone3 ENOSYS, so that libc falls back to clone, whose flags a filter can
read; and a call newer than libseccomp's table ENOSYS, as on an older kernel, so that a
newer libc falls back to the call it replaces: runc does so in the docker sandbox, and
local/seccomp.py in the local one). It allows what Docker's default allows a container with
every capability dropped (our sandboxes drop them all), minus the kernel surface a coding
agent never needs and container escapes come from (BLOCKED, each group with its reason).
A syscall of another architecture
(i386 through int 0x80, x32) kills the process: every rule names this machine's numbers
only, and the docker engine (runc) kills on a foreign architecture, so the local sandbox does
the same; no program an agent runs here makes such calls.

The filter applies to the agent's whole process tree once the sandbox is set up (bubblewrap
installs it just before it runs the agent's first program; the engine just before the
container's init): mounting the sandbox's folders comes first, and changing to the agent's
uid (setpriv, local/hardening.py) needs only setresuid/setresgid/setgroups/capset/prctl,
allowed here as Docker allows them (without capabilities they only drop privileges).

The kernel keyring: keys belong to a uid, not to a sandbox, so agents of different
principals running as one uid would share their user keyring (@u), and a key stored in one
turn would outlive it. add_key, keyctl and request_key are refused, which closes that
channel outright; per-turn keyrings would add nothing once no agent can reach a keyring.
"""

from __future__ import annotations

import errno
import platform
from dataclasses import dataclass
from typing import Any

# --- what an agent needs: Docker's default allow-list for a container without capabilities


@dataclass(frozen=True)
class Group:
    """Syscalls that share a reason. Names this kernel or libseccomp does not know (another
    architecture's, or newer) are skipped when the filter is built: they stay refused."""

    why: str
    names: tuple[str, ...]


# fmt: off
ALLOWED: tuple[Group, ...] = (
    Group(
        "files and folders: open, read, write, stat, links, permissions, extended attributes",
        (
            "access", "chdir", "chmod", "chown", "chown32", "close", "close_range",
            "copy_file_range", "creat", "dup", "dup2", "dup3", "faccessat", "faccessat2",
            "fadvise64", "fadvise64_64", "fallocate", "fchdir", "fchmod", "fchmodat",
            "fchmodat2", "fchown", "fchown32", "fchownat", "fcntl", "fcntl64", "fdatasync",
            "fgetxattr", "flistxattr", "flock", "fremovexattr", "fsetxattr", "fstat", "fstat64",
            "fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate", "ftruncate64",
            "futimesat", "getcwd", "getdents", "getdents64", "getxattr", "getxattrat",
            "lchown", "lchown32", "lgetxattr", "link", "linkat", "listxattr", "listxattrat",
            "llistxattr", "_llseek", "lremovexattr", "lseek", "lsetxattr", "lstat", "lstat64",
            "mkdir", "mkdirat", "mknod", "mknodat", "name_to_handle_at", "newfstatat", "open",
            "openat", "openat2", "pread64", "preadv", "preadv2", "pwrite64", "pwritev",
            "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "removexattr",
            "removexattrat", "rename", "renameat", "renameat2", "rmdir", "sendfile",
            "sendfile64", "setxattr", "setxattrat", "splice", "stat", "stat64", "statfs",
            "statfs64", "statx", "symlink", "symlinkat", "sync", "sync_file_range", "syncfs",
            "tee", "truncate", "truncate64", "umask", "unlink", "unlinkat", "utime",
            "utimensat", "utimensat_time64", "utimes", "vmsplice", "write", "writev",
            "cachestat", "statmount", "listmount",
        ),
    ),
    Group(
        "waiting on files and sockets: poll, select, epoll, inotify, eventfd, signalfd, "
        "timerfd, and the old asynchronous I/O (aio, not io_uring)",
        (
            "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
            "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2",
            "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch",
            "fanotify_mark", "poll", "ppoll", "ppoll_time64", "pselect6", "pselect6_time64",
            "select", "_newselect", "signalfd", "signalfd4", "timerfd_create",
            "timerfd_gettime", "timerfd_gettime64", "timerfd_settime", "timerfd_settime64",
            "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
            "io_pgetevents", "io_pgetevents_time64", "ioctl", "pipe", "pipe2",
        ),
    ),
    Group(
        "sockets (which families: see SOCKET_FAMILIES)",
        (
            "accept", "accept4", "bind", "connect", "getpeername", "getsockname",
            "getsockopt", "listen", "recv", "recvfrom", "recvmmsg", "recvmmsg_time64",
            "recvmsg", "send", "sendmmsg", "sendmsg", "sendto", "setsockopt", "shutdown",
            "socketpair",
        ),
    ),
    Group(
        "memory: mapping, protection, locking, memfd, protection keys",
        (
            "brk", "madvise", "membarrier", "memfd_create", "memfd_secret", "mincore",
            "mlock", "mlock2", "mlockall", "mmap", "mmap2", "mprotect", "mremap", "mseal",
            "msync", "munlock", "munlockall", "munmap", "pkey_alloc", "pkey_free",
            "pkey_mprotect", "remap_file_pages", "map_shadow_stack",
        ),
    ),
    Group(
        "processes and threads: fork/vfork (clone with CLONE_FLAGS_ALLOWED), exec, exit, "
        "wait, futexes, thread areas, pidfds of its own children",
        (
            "execve", "execveat", "exit", "exit_group", "fork", "vfork", "wait4", "waitid",
            "waitpid", "futex", "futex_requeue", "futex_time64", "futex_wait", "futex_waitv",
            "futex_wake", "get_robust_list", "set_robust_list", "get_thread_area",
            "set_thread_area", "set_tid_address", "arch_prctl", "modify_ldt", "rseq",
            "restart_syscall", "pidfd_open", "pidfd_send_signal", "process_mrelease",
            "prctl", "seccomp", "landlock_add_rule", "landlock_create_ruleset",
            "landlock_restrict_self",
        ),
    ),
    Group(
        "signals",
        (
            "alarm", "kill", "pause", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
            "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
            "rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sigaltstack", "sigprocmask",
            "sigreturn", "tgkill", "tkill",
        ),
    ),
    Group(
        "identity: reading it, and dropping privileges (setpriv's uid switch; without "
        "capabilities these can only give up ids, never gain one)",
        (
            "capget", "capset", "getegid", "getegid32", "geteuid", "geteuid32", "getgid",
            "getgid32", "getgroups", "getgroups32", "getpgid", "getpgrp", "getpid", "getppid",
            "getresgid", "getresgid32", "getresuid", "getresuid32", "getsid", "gettid",
            "getuid", "getuid32", "setfsgid", "setfsgid32", "setfsuid", "setfsuid32",
            "setgid", "setgid32", "setgroups", "setgroups32", "setpgid", "setregid",
            "setregid32", "setresgid", "setresgid32", "setresuid", "setresuid32", "setreuid",
            "setreuid32", "setsid", "setuid", "setuid32",
        ),
    ),
    Group(
        "time, limits, scheduling and system information",
        (
            "adjtimex", "clock_adjtime", "clock_adjtime64", "clock_getres",
            "clock_getres_time64", "clock_gettime", "clock_gettime64", "clock_nanosleep",
            "clock_nanosleep_time64", "getitimer", "gettimeofday", "nanosleep", "setitimer",
            "time", "times", "timer_create", "timer_delete", "timer_getoverrun",
            "timer_gettime", "timer_gettime64", "timer_settime", "timer_settime64",
            "getcpu", "getpriority", "getrandom", "getrlimit", "getrusage", "ioprio_get",
            "ioprio_set", "prlimit64", "sched_getaffinity", "sched_getattr", "sched_getparam",
            "sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler",
            "sched_rr_get_interval", "sched_rr_get_interval_time64", "sched_setaffinity",
            "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield",
            "setpriority", "setrlimit", "sysinfo", "ugetrlimit", "uname",
        ),
    ),
    Group(
        "System V and POSIX IPC (private to the sandbox's IPC namespace)",
        (
            "ipc", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
            "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64", "mq_unlink",
            "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget", "semop", "semtimedop",
            "semtimedop_time64", "shmat", "shmctl", "shmdt", "shmget",
        ),
    ),
    Group(
        "debugging its own processes (strace, gdb), as Docker allows on kernels >= 4.8, which "
        "check the filter again after a tracer changed a call; the sandbox's own pid "
        "namespace holds nothing else to trace",
        ("ptrace", "process_vm_readv", "process_vm_writev"),
    ),
    Group(
        "the kernel's uretprobe trampoline (a host tracing the agent's programs)",
        ("uretprobe",),
    ),
)
# fmt: on


@dataclass(frozen=True)
class ArgRule:
    """`name` is allowed when the low 32 bits of its argument `index`, masked with `mask`,
    equal `value` (32 bits: the kernel reads these arguments as ints, whatever the caller
    left in the upper half of the register)."""

    name: str
    index: int
    mask: int
    value: int
    why: str


# Namespace flags of clone(2): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
CLONE_NAMESPACE_FLAGS = 0x7E020000
# Address families an agent's programs use: local sockets, IPv4/IPv6 (the gateway relay on
# loopback) and netlink (glibc and node list interfaces through it). Docker also allows
# rarer ones (CAN, Bluetooth, RDS, TIPC, XDP…): each is kernel code no agent here needs.
SOCKET_FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16}
# personality(2) values Docker allows: PER_LINUX, PER_LINUX32, UNAME26 with either, and the
# query 0xffffffff. Not ADDR_NO_RANDOMIZE: no turning address randomisation off.
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
_LOW32 = 0xFFFFFFFF

ARG_RULES: tuple[ArgRule, ...] = (
    ArgRule(
        "clone",
        0,
        CLONE_NAMESPACE_FLAGS,
        0,
        "threads and processes, never in a new namespace (a user namespace gives root in it)",
    ),
    *(
        ArgRule("socket", 0, _LOW32, family, f"{name} sockets")
        for name, family in SOCKET_FAMILIES.items()
    ),
    *(
        ArgRule("personality", 0, _LOW32, value, "the execution domains Docker allows")
        for value in PERSONALITIES
    ),
)


# --- what is refused, and why (everything not allowed above is refused; these are named so
# that the reason is written down, and a test checks that none of them is allowed)

# fmt: off
MOUNTING = (
    "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
)

BLOCKED: tuple[Group, ...] = (
    Group(
        "io_uring: a large, fast-changing kernel interface behind many privilege escalations "
        "(Docker's newer default profiles refuse it too); libuv (node) and others fall "
        "back to threads when it is refused",
        ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    ),
    Group(
        "the kernel keyring: keys belong to a uid, not to a sandbox, so every agent running "
        "as one uid would share its user keyring (@u) across principals and turns",
        ("add_key", "keyctl", "request_key"),
    ),
    Group(
        "new namespaces: a user namespace makes its creator root inside it, which unlocks "
        "mount, netfilter and other code written for root (clone with namespace flags is "
        "refused by its ARG_RULES; clone3, whose flags sit in memory a filter cannot read, "
        "answers ENOSYS so that libc falls back to clone)",
        ("unshare", "setns"),
    ),
    Group(
        "mounting: the sandbox's mounts are made before the filter applies, and nothing "
        "inside remounts, moves or adds one",
        MOUNTING,
    ),
    Group(
        "eBPF programs and performance counters: verifier and perf bugs are classic kernel "
        "exploits, and counters leak other processes' timing",
        ("bpf", "perf_event_open"),
    ),
    Group(
        "userfaultfd: pauses the kernel at a chosen page fault, making race bugs reliable",
        ("userfaultfd",),
    ),
    Group(
        "the machine itself: kernels, modules, reboot, swap, accounting, clock, kernel log, "
        "host and domain names, quotas",
        (
            "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
            "create_module", "query_module", "get_kernel_syms", "reboot", "swapon", "swapoff",
            "acct", "settimeofday", "clock_settime", "clock_settime64", "stime", "syslog",
            "sethostname", "setdomainname", "quotactl", "quotactl_fd", "nfsservctl",
            "_sysctl", "sysfs", "ustat", "uselib", "vhangup", "lookup_dcookie",
        ),
    ),
    Group(
        "hardware and memory placement: I/O ports, NUMA policy (Docker: CAP_SYS_NICE only)",
        (
            "iopl", "ioperm", "vm86", "vm86old", "mbind", "set_mempolicy",
            "set_mempolicy_home_node", "get_mempolicy", "migrate_pages", "move_pages",
        ),
    ),
    Group(
        "other processes' files and memory, file handles (open_by_handle_at escaped Docker "
        "once: 'shocker'), whole-system file notification, security module attributes",
        (
            "open_by_handle_at", "kcmp", "pidfd_getfd", "process_madvise", "fanotify_init",
            "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules",
        ),
    ),
)
# fmt: on

# Answers ENOSYS instead of EPERM: libc then uses the older call the filter can check.
ENOSYS_NAMES = ("clone3",)
DEFAULT_ERRNO = errno.EPERM


def allowed_names() -> list[str]:
    """Every name allowed whatever its arguments."""
    return [name for group in ALLOWED for name in group.names]


def blocked_names() -> list[str]:
    return [name for group in BLOCKED for name in group.names]


# --- the docker sandbox: the same list as an engine seccomp profile

# Docker's names for this machine's architecture (platform.machine()).
_DOCKER_ARCH = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}


def docker_profile(machine: str | None = None, *, gvisor: bool = False) -> dict[str, Any]:
    """The engine's seccomp profile (what `docker run --security-opt seccomp=FILE` reads).
    Its architectures name this machine's only: the engine then kills a process making i386
    or x32 calls in an amd64 container (Docker's own profile filters them as its own).

    `gvisor`: for the runsc runtime (`runsc --oci-seccomp`), which answers every refusal
    with the default errno, never a rule's own: clone3 would answer EPERM, and glibc falls
    back to clone only on ENOSYS (threads would fail, as they do under Docker's own profile
    there). So clone3 is allowed: gVisor's own kernel serves it, and a namespace it makes is
    gVisor's, never the host's (docs/gvisor.md)."""
    arch = _DOCKER_ARCH.get(machine or platform.machine())
    if gvisor:
        return _gvisor_profile(arch)
    allowed = allowed_names() + (list(ENOSYS_NAMES) if gvisor else [])
    rules: list[dict[str, Any]] = [{"names": allowed, "action": "SCMP_ACT_ALLOW"}]
    for rule in ARG_RULES:
        masked = {"index": rule.index, "op": "SCMP_CMP_MASKED_EQ"}
        rules.append(
            {
                "names": [rule.name],
                "action": "SCMP_ACT_ALLOW",
                # The profile's MASKED_EQ: value is the mask, valueTwo what must remain.
                "args": [{**masked, "value": rule.mask, "valueTwo": rule.value}],
            }
        )
    rules.append({"names": blocked_names(), "action": "SCMP_ACT_ERRNO", "errnoRet": DEFAULT_ERRNO})
    if not gvisor:
        rules.append(
            {"names": list(ENOSYS_NAMES), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS}
        )
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": DEFAULT_ERRNO,
        "architectures": [arch] if arch else [],
        "syscalls": rules,
    }


# Under gVisor: the calls gVisor's own kernel still implements that the issue names as escape
# routes (io_uring, the keyring, bpf, new namespaces), refused; and mounting, which a user
# namespace made through clone3 (whose flags no filter reads) would otherwise hand the agent
# inside gVisor. The rest is gVisor's to serve.
GVISOR_REFUSED = (
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "add_key", "keyctl", "request_key",
    "bpf", "unshare", "setns",
    *MOUNTING,
)  # fmt: skip
CLONE_NEWUSER = 0x10000000


def _gvisor_profile(arch: str | None) -> dict[str, Any]:
    """Under gVisor a deny list, not the allow-list: with the allow-list (its argument rules,
    its answers all EPERM under this runsc) the gateway's relay inside the sandbox never
    answered; what the agent's calls reach is gVisor's own kernel, itself filtered on the host
    far more strictly than Docker's default. clone3 is left to gVisor's own kernel."""
    newuser = {"index": 0, "op": "SCMP_CMP_MASKED_EQ", "value": CLONE_NEWUSER}
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": [arch] if arch else [],
        "syscalls": [
            {"names": list(GVISOR_REFUSED), "action": "SCMP_ACT_ERRNO", "errnoRet": DEFAULT_ERRNO},
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": DEFAULT_ERRNO,
                "args": [{**newuser, "valueTwo": CLONE_NEWUSER}],
            },
        ],
    }
