"""The syscall filter (sandbox/syscall_filter.py): the compiled BPF program, run here on made-up
syscalls by a small classic-BPF interpreter, and the docker profile made from the same list.
What the kernel does with them: test_local_sandbox.py and test_docker_sandbox.py."""

from __future__ import annotations

import errno
import platform
import struct

from uhp_server.sandbox import syscall_filter
from uhp_server.sandbox.local import seccomp

ALLOW, KILL_PROCESS = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
NATIVE_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[platform.machine()]
I386 = 0x40000003
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17


def number(name: str) -> int:
    resolved = seccomp._library().seccomp_syscall_resolve_name(name.encode())
    assert resolved >= 0, name
    return int(resolved)


def run(nr: int, *args: int, arch: int = NATIVE_ARCH) -> int:
    """What the program answers for one call: a classic-BPF interpreter for the instructions
    libseccomp emits, over struct seccomp_data (nr, arch, ip, args[6]; little-endian)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    program = seccomp.program()
    code = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    acc, memory, pc = 0, [0] * 16, 0
    while True:
        op, jt, jf, k = code[pc]
        pc += 1
        if op == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif op == 0x60:  # ld M[k]
            acc = memory[k]
        elif op == 0x02:  # st M[k]
            memory[k] = acc
        elif op == 0x54:  # and #k
            acc &= k
        elif op == 0x05:  # ja
            pc += k
        elif op in (0x15, 0x25, 0x35, 0x45):  # jeq, jgt, jge, jset
            taken = {0x15: acc == k, 0x25: acc > k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
            pc += jt if taken else jf
        elif op == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"opcode {op:#x} not interpreted")


def test_another_architecture_and_x32_are_killed() -> None:
    assert run(number("getpid")) == ALLOW
    assert run(number("getpid"), arch=I386) == KILL_PROCESS
    if platform.machine() == "x86_64":
        assert run(0x40000000 | number("getpid")) == KILL_PROCESS


def test_every_blocked_call_answers_eperm() -> None:
    # (Names of other architectures, or newer than this libseccomp, have no number here:
    # nothing allows them, and the default answer is EPERM.)
    resolve = seccomp._library().seccomp_syscall_resolve_name
    here = [name for name in syscall_filter.blocked_names() if resolve(name.encode()) >= 0]
    assert len(here) > 50
    for name in here:
        assert run(number(name)) == EPERM, name


def test_blocked_and_allowed_never_overlap() -> None:
    allowed = set(syscall_filter.allowed_names()) | {r.name for r in syscall_filter.ARG_RULES}
    assert not allowed & set(syscall_filter.blocked_names())
    assert not allowed & set(syscall_filter.ENOSYS_NAMES)


def test_clone3_answers_enosys_so_libc_falls_back_to_clone() -> None:
    assert run(number("clone3")) == ENOSYS


def test_clone_may_not_make_a_namespace() -> None:
    clone = number("clone")
    assert run(clone, SIGCHLD) == ALLOW
    assert run(clone, CLONE_NEWUSER | SIGCHLD) == EPERM
    assert run(clone, (0xFFFF << 32) | CLONE_NEWUSER | SIGCHLD) == EPERM
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x20000000, 0x40000000):
        assert run(clone, flag | SIGCHLD) == EPERM


def test_argument_checks_read_the_low_32_bits_as_the_kernel_does() -> None:
    socket, personality = number("socket"), number("personality")
    assert run(socket, 2) == ALLOW
    assert run(socket, (1 << 32) | 2) == ALLOW  # the kernel reads AF_INET too
    assert run(socket, 40) == EPERM  # AF_VSOCK
    assert run(socket, (1 << 32) | 40) == EPERM
    assert run(personality, 0xFFFFFFFF) == ALLOW  # the query
    assert run(personality, 0x0040000) == EPERM  # ADDR_NO_RANDOMIZE


def test_what_programs_need_is_allowed() -> None:
    for name in ("read", "write", "openat", "execve", "futex", "mmap", "setresuid", "capset"):
        assert run(number(name)) == ALLOW, name


def test_the_docker_profile_is_the_same_list() -> None:
    profile = syscall_filter.docker_profile("x86_64")
    assert (profile["defaultAction"], profile["defaultErrnoRet"]) == ("SCMP_ACT_ERRNO", 1)
    assert profile["architectures"] == ["SCMP_ARCH_X86_64"]  # no i386, no x32
    allowed = {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW" and "args" not in rule
        for name in rule["names"]
    }
    assert allowed == set(syscall_filter.allowed_names())
    assert not allowed & set(syscall_filter.blocked_names())
    conditional = [rule for rule in profile["syscalls"] if "args" in rule]
    assert {rule["names"][0] for rule in conditional} == {"clone", "socket", "personality"}
    clone = next(rule for rule in conditional if rule["names"] == ["clone"])
    assert clone["args"] == [
        {"index": 0, "op": "SCMP_CMP_MASKED_EQ", "value": 0x7E020000, "valueTwo": 0}
    ]
    enosys = [rule for rule in profile["syscalls"] if rule.get("errnoRet") == errno.ENOSYS]
    assert enosys == [{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]


def test_under_gvisor_the_escape_routes_are_refused_and_clone3_left_to_gvisor() -> None:
    # runsc answers a refusal with the default errno only: clone3 refused would be EPERM,
    # and glibc's threads would fail instead of falling back to clone. The rest runs on
    # gVisor's kernel; what the issue names as escape routes is refused there too.
    profile = syscall_filter.docker_profile("x86_64", gvisor=True)
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    rules = [rule for rule in profile["syscalls"] if not rule.get("args")]
    refused = {name for rule in rules for name in rule["names"]}
    assert {"io_uring_setup", "add_key", "keyctl", "request_key", "bpf", "unshare"} <= refused
    assert "clone3" not in refused
    [clone] = [rule for rule in profile["syscalls"] if rule.get("args")]
    assert clone["names"] == ["clone"] and clone["args"][0]["value"] == 0x10000000  # NEWUSER


def test_a_call_newer_than_the_filter_knows_answers_enosys() -> None:
    # As on an older kernel: a newer libc falls back to the call it replaces (runc does the
    # same under Docker).
    newest = seccomp._newest_known()
    assert newest >= number("futex_waitv")
    assert run(newest + 1) == ENOSYS
    assert run(900) == ENOSYS
    assert run(newest + 1, arch=I386) == KILL_PROCESS
