"""A probe of the kernel surface a sandbox leaves its agent: a Python program (run with the
sandbox's /usr/bin/python3) that makes raw syscalls through ctypes and prints one
`name=answer` line each, answer `ok` or the errno's name."""

from __future__ import annotations

import shlex

# Each probe's call; numbers per architecture (x86_64 and aarch64's generic table).
PROBE = r"""
import ctypes, errno, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {
    "x86_64": dict(getpid=39, add_key=248, keyctl=250, request_key=249, io_uring_setup=425,
        bpf=321, unshare=272, clone=56, clone3=435, perf_event_open=298, userfaultfd=323,
        mount=165, personality=135, socket=41),
    "aarch64": dict(getpid=172, add_key=217, keyctl=219, request_key=218, io_uring_setup=425,
        bpf=280, unshare=97, clone=220, clone3=435, perf_event_open=241, userfaultfd=282,
        mount=40, personality=92, socket=198),
}[platform.machine()]
USER_KEYRING = -4  # KEY_SPEC_USER_KEYRING
CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17

def raw(number, *args):
    ctypes.set_errno(0)
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result = libc.syscall(ctypes.c_long(number), *args)
    return result, (errno.errorcode.get(ctypes.get_errno(), "?") if result < 0 else "ok")

def call(name, *args):
    return raw(NR[name], *args)[1]

def clone3_namespace_mount():
    # clone3 with a new user and mount namespace, whose flags sit in memory no filter reads;
    # where it makes one, the child tries a mount in it and exits with the answer's errno.
    args = (ctypes.c_uint64 * 8)(CLONE_NEWUSER | CLONE_NEWNS, 0, 0, 0, SIGCHLD, 0, 0, 0)
    result, answer = raw(NR["clone3"], ctypes.byref(args), 64)
    if result == 0:
        mounted, _ = raw(NR["mount"], b"none", b"/tmp", b"tmpfs", 0, None)
        os._exit(0 if mounted == 0 else ctypes.get_errno())
    if result < 0:
        return answer
    code = os.waitstatus_to_exitcode(os.waitpid(result, 0)[1])
    return "mount_" + ("ok" if code == 0 else errno.errorcode.get(code, str(code)))

def clone(flags):
    result, answer = raw(NR["clone"], flags | SIGCHLD, 0, 0, 0, 0)
    if result == 0:
        os._exit(0)  # the child
    if result > 0:
        os.waitpid(result, 0)
    return answer

answers = {
    "getpid": call("getpid"),
    "fork": clone(0),
    "socket_inet": call("socket", 2, 1, 0),
    "add_key": call("add_key", b"user", b"uhp-probe", b"x", 1, USER_KEYRING),
    "keyctl": call("keyctl", 0, USER_KEYRING, 0),  # KEYCTL_GET_KEYRING_ID
    "request_key": call("request_key", b"user", b"uhp-probe", None, 0),
    "io_uring_setup": call("io_uring_setup", 1, None),
    "bpf": call("bpf", 0, None, 0),
    "perf_event_open": call("perf_event_open", None, 0, -1, -1, 0),
    "userfaultfd": call("userfaultfd", 0),
    "mount": call("mount", b"none", b"/tmp", b"tmpfs", 0, None),
    "personality_no_aslr": call("personality", 0x0040000),
    "socket_vsock": call("socket", 40, 1, 0),
    "clone3": call("clone3", None, 0),
    "clone3_namespace_mount": clone3_namespace_mount(),
    "clone_newuser": clone(CLONE_NEWUSER),
    "unshare_newuser": call("unshare", CLONE_NEWUSER),
    "newer_than_known": raw(600)[1],  # a number no kernel has yet
}
for name, answer in answers.items():
    print(f"{name}={answer}")
sys.stdout.flush()
"""

# An x32 call (x86_64 only): the filter kills the process (SIGSYS; the shell says 159).
X32_PROBE = r"""
import ctypes, platform
if platform.machine() == "x86_64":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(ctypes.c_long(0x40000000 | 39))  # x32's getpid
"""

# What every sandbox answers: the filter's EPERM (clone3: ENOSYS), and what it still allows.
EXPECTED = {
    "getpid": "ok",
    "fork": "ok",
    "socket_inet": "ok",
    "add_key": "EPERM",
    "keyctl": "EPERM",
    "request_key": "EPERM",
    "io_uring_setup": "EPERM",
    "bpf": "EPERM",
    "perf_event_open": "EPERM",
    "userfaultfd": "EPERM",
    "mount": "EPERM",
    "personality_no_aslr": "EPERM",
    "socket_vsock": "EPERM",
    "clone3": "ENOSYS",
    "clone3_namespace_mount": "ENOSYS",  # no namespace: libc falls back to the filtered clone
    "clone_newuser": "EPERM",
    "unshare_newuser": "EPERM",
    "newer_than_known": "ENOSYS",  # as on an older kernel: a newer libc falls back
    "x32_exit": "159",
}


def command() -> str:
    """The shell command that runs the probe."""
    return (
        f"/usr/bin/python3 -c {shlex.quote(PROBE)}; "
        f"/usr/bin/python3 -c {shlex.quote(X32_PROBE)}; echo x32_exit=$?"
    )


def answers(lines: list[str]) -> dict[str, str]:
    """The probe's `name=answer` lines as a dict."""
    return dict(line.split("=", 1) for line in lines if "=" in line)


# In gVisor no call reaches the host kernel: the Sentry answers each one itself. The filter
# there refuses only what the Sentry would otherwise serve (syscall_filter.GVISOR_REFUSED);
# the rest the Sentry turns away in its own words: it has no perf events, userfaultfd or vsock,
# refuses personality flags it does not model, and x32 is no ABI of its, so the x32 call is
# an unknown one (ENOSYS) rather than a kill. clone3 it implements (the probe's empty call:
# EINVAL); the filter leaves it to gVisor, whose runsc answers a refusal with EPERM only, on
# which libc would not fall back to clone (sandbox/syscall_filter.py, docs/gvisor.md).
IN_GVISOR = {
    "clone3": "EINVAL",
    # A namespace is made (gVisor's own), and the mount in it refused by the filter.
    "clone3_namespace_mount": "mount_EPERM",
    "perf_event_open": "ENODEV",
    "userfaultfd": "ENOSYS",
    "personality_no_aslr": "EINVAL",
    "socket_vsock": "EAFNOSUPPORT",
    "x32_exit": "0",
}


def expected(machine: str, *, gvisor: bool = False) -> dict[str, str]:
    """What the probe prints on MACHINE, in the docker sandbox's gVisor runtime or not."""
    answers = EXPECTED | IN_GVISOR if gvisor else EXPECTED
    return {k: v for k, v in answers.items() if machine == "x86_64" or k != "x32_exit"}
