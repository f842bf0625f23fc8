"""Listening sockets the server makes inside a local sandbox's own network namespace.

The sandbox's network namespace has nothing but loopback; its CLI reaches the gateway at
127.0.0.1:GATEWAY_PORT there. A root server enters that namespace on a thread of its own
(setns changes only the calling thread's namespace; the thread then ends), makes the
listening sockets, and serves the gateway (and the egress proxy) on them from its own loop:
a socket keeps the namespace it was made in. So there is no relay process in the sandbox, no
wait for one to listen before the CLI starts, and no hop through a Unix socket and a fork
per request: some 15 ms of every turn on the 2-core machine (bench/README.md, overhead.py).
Nothing else of the server enters the sandbox: only these sockets live in its namespace,
which nothing outside it can reach.

An unprivileged server cannot do this (setns into a namespace needs CAP_SYS_ADMIN in the
caller's own user namespace too), so it keeps the relays (sandbox.py's LAUNCH).
"""

from __future__ import annotations

import ctypes
import functools
import os
import socket
import threading
from collections.abc import Sequence

CLONE_NEWNET = 0x40000000
# Binding 127.0.0.1 before bwrap has brought the sandbox's loopback up: the socket gets the
# connections once it is (bwrap does before the CLI starts).
IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)
BACKLOG = 128


def can_enter() -> bool:
    """Whether this server may enter a sandbox's network namespace (it runs as root)."""
    return os.geteuid() == 0


@functools.cache
def _setns() -> ctypes._CFuncPtr:  # type: ignore[name-defined]  # ctypes' private type
    # os.setns is Python 3.12's; Debian 12's python is 3.11.
    setns = ctypes.CDLL(None, use_errno=True).setns
    setns.argtypes = (ctypes.c_int, ctypes.c_int)
    setns.restype = ctypes.c_int
    return setns


def listen_inside(pid: int, ports: Sequence[int]) -> list[socket.socket]:
    """Non-blocking sockets listening on 127.0.0.1:<port>, one per port in order, in the
    network namespace of process `pid`. Blocks for the moment a thread takes; raises
    OSError."""
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def inside() -> None:
        try:
            namespace = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _setns()(namespace, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"setns into the sandbox: {os.strerror(errno)}")
            finally:
                os.close(namespace)
            for port in ports:
                # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only
                # on sockets whose proto says TCP, and an accepted one inherits this one's.
                # With Nagle on, a reply written in two parts (head, then body) waited for
                # the agent's delayed ACK: 40 ms on each model request after a turn's first.
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
                made.append(listener)
                listener.setsockopt(socket.IPPROTO_IP, IP_FREEBIND, 1)
                listener.bind(("127.0.0.1", port))
                listener.listen(BACKLOG)
                listener.setblocking(False)
        except BaseException as exc:
            failed.append(exc)

    # A thread of its own, which ends in the sandbox's namespace: no thread of a pool is left
    # there for other work to run in.
    thread = threading.Thread(target=inside, name=f"netns-{pid}")
    thread.start()
    thread.join()
    if failed:
        for listener in made:
            listener.close()
        raise failed[0]
    return made
