"""The red-team's kernel reproductions of issue 27 as one probe a sandbox runs.

`PROBE` is a /usr/bin/python3 script (ctypes only: no compiler in the sandbox) that tries
each reproduction and prints one JSON object, a verdict per attempt: "refused: <why>" or
what the attacker got. `probe_command` runs it inside any sandbox that has a shell.
"""

from __future__ import annotations

import base64
import json

# x86_64 syscall numbers (the only architecture the sandboxes run on here).
PROBE = r"""
import ctypes, json, os, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {"add_key": 248, "keyctl": 250, "unshare": 272, "mount": 165, "bpf": 321,
      "io_uring_setup": 425}
KEY_SPEC_USER_KEYRING = -4
KEYCTL_SEARCH, KEYCTL_READ = 10, 11
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
BPF_MAP_CREATE, BPF_MAP_TYPE_ARRAY = 0, 2


def call(name, *args):
    result = libc.syscall(NR[name], *args)
    if result < 0:
        return "refused: " + os.strerror(ctypes.get_errno()), result
    return None, result


def store_key(description, payload):
    refused, _ = call("add_key", b"user", description, payload, ctypes.c_size_t(len(payload)),
                      ctypes.c_int(KEY_SPEC_USER_KEYRING))
    return refused or "stored"


def read_key(description):
    refused, key = call("keyctl", ctypes.c_int(KEYCTL_SEARCH), ctypes.c_int(KEY_SPEC_USER_KEYRING),
                        b"user", description, ctypes.c_int(0))
    if refused:
        return refused
    buffer = ctypes.create_string_buffer(256)
    refused, size = call("keyctl", ctypes.c_int(KEYCTL_READ), ctypes.c_long(key), buffer,
                         ctypes.c_size_t(256))
    return refused or "read: " + buffer.raw[:size].decode(errors="replace")


def io_uring():
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    refused, fd = call("io_uring_setup", ctypes.c_uint(1), params)
    return refused or "an io_uring"


def bpf():
    attr = ctypes.create_string_buffer(128)  # union bpf_attr, map_create
    ctypes.memmove(attr, (ctypes.c_uint32 * 4)(BPF_MAP_TYPE_ARRAY, 4, 4, 1), 16)
    refused, fd = call("bpf", ctypes.c_int(BPF_MAP_CREATE), attr, ctypes.c_uint(128))
    return refused or "a bpf map"


def user_namespace_root():
    # unshare -Ur: a new user namespace where we are root, then a mount in a new mount ns.
    uid = os.getuid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        refused, _ = call("unshare", ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNS))
        if not refused:
            try:
                with open("/proc/self/setgroups", "w") as file:
                    file.write("deny")
                with open("/proc/self/uid_map", "w") as file:
                    file.write(f"0 {uid} 1")
                refused, _ = call("mount", b"none", b"/tmp", b"tmpfs", ctypes.c_ulong(0), None)
                refused = ("mount " + refused) if refused else None
            except OSError as exc:
                refused = "refused: uid_map: " + exc.strerror
        os.write(write, (refused or "root and a mount").encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    return os.read(read, 200).decode()


verdicts = {}
mode = sys.argv[1] if len(sys.argv) > 1 else "all"
if mode in ("all", "store"):
    verdicts["add_key @u"] = store_key(b"uhp-probe", b"a message to another principal")
if mode in ("all", "read"):
    verdicts["keyctl search+read @u"] = read_key(b"uhp-probe")
if mode == "all":
    verdicts["io_uring_setup"] = io_uring()
    verdicts["bpf"] = bpf()
    verdicts["unshare -Ur + mount"] = user_namespace_root()
print(json.dumps(verdicts))
"""


def probe_command(mode: str = "all") -> str:
    """A shell command running PROBE with the system's python3: `all` the reproductions,
    `store` only the key a principal leaves, `read` only another principal's attempt to
    read it."""
    encoded = base64.b64encode(PROBE.encode()).decode()
    return f"echo {encoded} | base64 -d > /tmp/probe.py && /usr/bin/python3 /tmp/probe.py {mode}"


def verdicts(output: list[str]) -> dict[str, str]:
    """The probe's verdicts, from the lines it printed (its last line)."""
    parsed: dict[str, str] = json.loads(output[-1])
    return parsed
