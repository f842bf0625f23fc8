"""Which ports a CLI connected to, and which it served itself, from an strace of its process
tree (`strace -f -e trace=connect,bind,getsockname`).

A CLI that serves itself on loopback (OpenCode, Kilo: a fixed port, or, when another process
holds that one, a port the kernel picks, learnt by getsockname) connects to its own server:
that is not a way out. Every other connection must reach the gateway.
"""

from __future__ import annotations

import re
from pathlib import Path

TRACED = "trace=connect,bind,getsockname"
_CALL = re.compile(r"^(\d+)\s+(connect|bind|getsockname)\((\d+), (.*)$")
_PORT = re.compile(r"htons\((\d+)\)")


def strace_wrap(strace: str, trace: Path) -> list[str]:
    """The command prefix that traces the CLI's connections into `trace`."""
    return [strace, "-f", "-qq", "-e", TRACED, "-o", str(trace)]


def own_ports(lines: list[str]) -> set[str]:
    """The loopback ports the traced processes serve themselves: bound to a port, or bound to
    port 0 and told the kernel's choice by getsockname before the socket connected anywhere.
    (A descriptor number comes back after a close: a connect ends what its bind said.)"""
    listening: set[tuple[str, str]] = set()  # (pid, fd) bound and not connected since
    ports: set[str] = set()
    for line in lines:
        found = _CALL.match(line)
        if found is None or "AF_INET" not in line:
            continue
        pid, call, fd, rest = found.groups()
        if call == "connect":
            listening.discard((pid, fd))
            continue
        port = _PORT.search(rest)
        if port is None or not line.rstrip().endswith("= 0"):
            continue
        if call == "bind":
            listening.add((pid, fd))
        if (pid, fd) in listening and port.group(1) != "0":
            ports.add(port.group(1))
    return ports


def outside_connections(lines: list[str], gateway_port: str) -> list[str]:
    """The traced AF_INET connects that reach neither the gateway on loopback nor a port the
    tree serves itself (asserting that there was any connection at all)."""
    connects = [line for line in lines if " connect(" in line and "AF_INET" in line]
    assert connects, "no connection traced at all"
    allowed = {gateway_port, *own_ports(lines)}
    return [line for line in connects if not _reaches(line, allowed)]


def _reaches(connect: str, ports: set[str]) -> bool:
    found = _PORT.findall(connect)
    return "127.0.0.1" in connect and len(found) == 1 and found[0] in ports
