"""The syscall filter of sandbox/syscall_filter.py compiled to the classic BPF program that
`bwrap --seccomp FD` installs.

Compiled by libseccomp (libseccomp.so.2, through ctypes): it knows every architecture's
syscall numbers, emits the architecture check (a call of another architecture, or x32's
on x86_64, kills the process) and is on every Debian 12 machine already — apt
itself depends on it — so `scripts/install.sh` needs no new package, and the venv no
binding (Debian's python3-seccomp is not visible from a venv; pyseccomp on PyPI is the same
ctypes calls). The program is compiled once per server and costs about a millisecond.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import struct
import tempfile

from uhp_server.sandbox import syscall_filter

# libseccomp's constants (seccomp.h).
_ACT_ALLOW = 0x7FFF0000
_ACT_KILL_PROCESS = 0x80000000
_ACT_ERRNO = 0x00050000
_ATTR_ACT_BADARCH = 2
_CMP_MASKED_EQ = 7
_RESOLVE_ERROR = -1  # __NR_SCMP_ERROR: a name libseccomp does not know
_SCAN_UP_TO = 1024  # syscall numbers looked up for the newest one libseccomp knows

# Classic BPF, for the few instructions written here (struct sock_filter: code, jt, jf, k).
_LD_ABS, _JEQ, _JGT, _JGE, _RET = 0x20, 0x15, 0x25, 0x35, 0x06
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # in struct seccomp_data
_X32_BIT = 0x40000000


class SeccompError(RuntimeError):
    """libseccomp is missing or refused the filter."""


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


def _errno_action(code: int) -> int:
    return _ACT_ERRNO | (code & 0xFFFF)


@functools.cache
def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompError(f"libseccomp not found ({exc}): apt-get install libseccomp2") from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_attr_set.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    lib.seccomp_syscall_resolve_num_arch.restype = ctypes.c_void_p  # a char* to free
    lib.seccomp_syscall_resolve_num_arch.argtypes = (ctypes.c_uint32, ctypes.c_int)
    return lib


def _check(code: int, what: str) -> None:
    if code < 0:
        raise SeccompError(f"libseccomp: {what}: {os.strerror(-code)}")


@functools.cache
def program() -> bytes:
    """The filter as `struct sock_filter` records for this machine's architecture: a call
    newer than any this libseccomp knows answers ENOSYS (below), the rest is libseccomp's."""
    return _newer_calls_enosys(_newest_known()) + _compiled()


def _newest_known() -> int:
    """The highest syscall number libseccomp has a name for on this architecture."""
    lib = _library()
    free = ctypes.CDLL(None).free
    free.argtypes = (ctypes.c_void_p,)
    arch = lib.seccomp_arch_native()
    newest = -1
    for number in range(_SCAN_UP_TO):
        name = lib.seccomp_syscall_resolve_num_arch(arch, number)  # malloc'd, or NULL
        if name:
            free(name)
            newest = number
    return newest


def _newer_calls_enosys(newest: int) -> bytes:
    """BPF put before libseccomp's program: a native call numbered above `newest` answers
    ENOSYS, as it would on an older kernel, so that a newer libc falls back to the call it
    replaces (EPERM would make it fail); runc does the same under Docker. Another
    architecture's calls and x32's (numbers from 0x40000000) go on to libseccomp's checks."""
    arch = _library().seccomp_arch_native()
    stub = [
        (_LD_ABS, 0, 0, _ARCH_OFFSET),
        (_JEQ, 0, 4, arch),  # another architecture: to libseccomp's program
        (_LD_ABS, 0, 0, _NR_OFFSET),
        (_JGE, 2, 0, _X32_BIT),  # x32 (or -1, a tracer's skip): to libseccomp's program
        (_JGT, 0, 1, newest),
        (_RET, 0, 0, _errno_action(errno.ENOSYS)),
    ]
    return b"".join(struct.pack("=HBBI", *insn) for insn in stub)


def _compiled() -> bytes:
    lib = _library()
    ctx = lib.seccomp_init(_errno_action(syscall_filter.DEFAULT_ERRNO))
    if not ctx:
        raise SeccompError("libseccomp: seccomp_init failed")
    try:
        # Another architecture's call kills the process, as the docker engine's filter does.
        _check(lib.seccomp_attr_set(ctx, _ATTR_ACT_BADARCH, _ACT_KILL_PROCESS), "bad arch")

        def add(action: int, name: str, *cmps: _ArgCmp) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number == _RESOLVE_ERROR:
                return  # unknown to this libseccomp: refused by default
            array = (_ArgCmp * len(cmps))(*cmps) if cmps else None
            _check(lib.seccomp_rule_add_array(ctx, action, number, len(cmps), array), name)

        for name in syscall_filter.allowed_names():
            add(_ACT_ALLOW, name)
        for rule in syscall_filter.ARG_RULES:
            add(_ACT_ALLOW, rule.name, _ArgCmp(rule.index, _CMP_MASKED_EQ, rule.mask, rule.value))
        # BLOCKED needs no rule: it is the default answer (libseccomp refuses a rule that
        # repeats the default).
        for name in syscall_filter.ENOSYS_NAMES:
            add(_errno_action(errno.ENOSYS), name)
        with tempfile.TemporaryFile() as out:
            _check(lib.seccomp_export_bpf(ctx, out.fileno()), "export")
            out.seek(0)
            return out.read()
    finally:
        lib.seccomp_release(ctx)


def program_fd() -> int:
    """A pipe's read end holding the program, for `bwrap --seccomp FD` (bwrap reads it to the
    end; the program, a few KB, fits in the pipe's buffer). The caller closes it."""
    data = program()
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end
