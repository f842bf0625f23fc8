"""A request without a valid credential is refused before its body is read, on every route
that takes one: the server never holds a stranger's body."""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from tests.support.server import ServerProcess
from uhp_server.doors.uhp import discovery, files, harness_events, harnesses, sessions, share, tasks

pytestmark = pytest.mark.slow

HUGE = 62 * 1024 * 1024  # under UHP_MAX_REQUEST_BYTES: only authentication can refuse it
CREDENTIALS = {"wrong key": b"Authorization: Bearer uhp_sk_not_a_key\r\n", "no key": b""}


def body_routes() -> list[tuple[str, str]]:
    """Every (method, path) of the API that takes a body, path parameters filled in."""
    found = set()
    for module in (discovery, files, harness_events, harnesses, sessions, share, tasks):
        for route in module.router.routes:
            assert isinstance(route, APIRoute) and route.methods is not None
            for method in route.methods & {"POST", "PUT", "PATCH", "DELETE"}:
                found.add((method, re.sub(r"\{[^}]+\}", "x1", route.path)))
    return sorted(found)


def request_head(method: str, path: str, port: int, credential: bytes, length: int) -> bytes:
    content_type = "multipart/form-data; boundary=b" if path == "/v1/files" else "application/json"
    return (
        (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n"
        ).encode()
        + credential
        + b"\r\n"
    )


def status_line(sock: socket.socket) -> bytes:
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        if not chunk:
            break
        answer += chunk
    return answer.split(b"\r\n", 1)[0]


@pytest.mark.parametrize("credential", CREDENTIALS.values(), ids=CREDENTIALS.keys())
@pytest.mark.parametrize(("method", "path"), body_routes())
def test_an_unauthenticated_body_is_refused_before_it_is_read(
    server: ServerProcess, method: str, path: str, credential: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request_head(method, path, server.port, credential, HUGE))
        sock.sendall(b"{" + b" " * 4096)  # a few KB of the 62 MB announced, then nothing
        assert status_line(sock) == b"HTTP/1.1 401 Unauthorized"


def rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found is not None, status
    return int(found.group(1)) * 1024


def send_whole_body(port: int) -> None:
    head = request_head("POST", "/v1/responses", port, CREDENTIALS["wrong key"], HUGE)
    chunk = b" " * (1024 * 1024)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        try:
            sock.sendall(head + b"{")
            for _ in range(HUGE // len(chunk)):
                sock.sendall(chunk)
        except OSError:
            return  # the server answered and closed: what it should do


def test_concurrent_huge_bodies_with_a_wrong_key_leave_memory_flat(server: ServerProcess) -> None:
    assert server.proc is not None
    before = rss_bytes(server.proc.pid)
    senders = [threading.Thread(target=send_whole_body, args=(server.port,)) for _ in range(8)]
    started = time.monotonic()
    for sender in senders:
        sender.start()
    peak = before
    while any(s.is_alive() for s in senders) and time.monotonic() - started < 120:
        peak = max(peak, rss_bytes(server.proc.pid))
        time.sleep(0.05)
    for sender in senders:
        sender.join(10)
    # 8 x 62 MB would be ~500 MB held; refused before reading, the server holds none of it.
    assert peak - before < 32 * 1024 * 1024, f"RSS grew {(peak - before) >> 20} MB"
