"""Idle and stalled connections cannot take the server down: a real server with a lowered
descriptor limit, thousands of sockets that never send a request, heads and bodies that
stall. Long streams, which are complete requests, are never cut; one key's streams are capped
and never take the last connections, and health and discovery answer even at the cap."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import API_KEY, server_env
from tests.scripted_provider import RunningProvider
from tests.support.server import ServerProcess
from uhp_server.http.connections import connection_cap

pytestmark = pytest.mark.slow

FD_LIMIT = 1024
CAP = connection_cap(2048, FD_LIMIT)  # the default UHP_MAX_CONNECTIONS under this limit
TIMEOUT = 3.0  # header and body timeouts of the server under test
IDLE_SOCKETS = 3000


def lower_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory, provider: RunningProvider, base_installed: Path
) -> Iterator[ServerProcess]:
    env = server_env(
        provider,
        UHP_REQUEST_HEADER_TIMEOUT_SECONDS=str(TIMEOUT),
        UHP_REQUEST_BODY_TIMEOUT_SECONDS=str(TIMEOUT),
    )
    running = ServerProcess(tmp_path_factory.mktemp("guarded"), env, preexec=lower_fd_limit)
    running.start()
    yield running
    running.stop()


def open_fds(server: ServerProcess) -> int:
    assert server.proc is not None
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server ends the connection (any answer, then EOF) within the time."""
    deadline = time.monotonic() + within
    sock.setblocking(False)
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([sock], [], [], left)
        if readable:
            try:
                if sock.recv(65536) == b"":
                    return True
            except ConnectionError:
                return True
    return False


def all_closed_by_server(sockets: list[socket.socket], within: float) -> bool:
    """Whether the server ends every connection (any answer, then EOF) within the time."""
    poller = select.poll()  # select() cannot watch descriptors past 1024
    waiting = {sock.fileno(): sock for sock in sockets}
    for fd, sock in waiting.items():
        sock.setblocking(False)
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + within
    while waiting and (left := deadline - time.monotonic()) > 0:
        for fd, _event in poller.poll(left * 1000):
            try:
                ended = waiting[fd].recv(65536) == b""
            except ConnectionError:
                ended = True
            if ended:
                poller.unregister(fd)
                del waiting[fd]
    return not waiting


@pytest.fixture
def many_sockets() -> Iterator[list[socket.socket]]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, IDLE_SOCKETS + 1024)), hard))
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_thousands_of_idle_sockets_neither_exhaust_nor_flood_the_server(
    guarded: ServerProcess, many_sockets: list[socket.socket]
) -> None:
    log_before = len(guarded.log())
    for count in range(IDLE_SOCKETS):  # about 3,000 a second, and never a byte sent
        many_sockets.append(socket.create_connection(("127.0.0.1", guarded.port), timeout=10))
        if count % 100 == 99:
            time.sleep(0.03)  # within what the kernel's accept queue holds
    # While the flood sits there, discovery still answers, and fast.
    latencies = []
    for _ in range(10):
        started = time.monotonic()
        answer = httpx.get(f"{guarded.url}/v1/uhp", timeout=5)
        latencies.append(time.monotonic() - started)
        assert answer.status_code == 200
    assert max(latencies) < 1.0, latencies
    assert open_fds(guarded) < FD_LIMIT - 64
    # Every idle socket is closed by the server: to make room at the cap, or by the timeout.
    assert all_closed_by_server(many_sockets, within=TIMEOUT + 10)
    assert open_fds(guarded) < 64
    # One warning for the whole flood, no traceback, nothing per connection.
    flood_log = guarded.log()[log_before:]
    assert len(flood_log) < 4096, flood_log[:2000]
    assert "Traceback" not in flood_log and "Too many open files" not in flood_log
    events = [json.loads(line) for line in flood_log.splitlines() if line.startswith("{")]
    warnings = [e for e in events if e.get("event") == "connection_cap_reached"]
    assert len(warnings) == 1 and warnings[0]["max_connections"] == CAP
    assert httpx.get(f"{guarded.url}/v1/uhp", timeout=5).status_code == 200


def test_an_idle_socket_is_closed_after_the_header_timeout(guarded: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", guarded.port)) as sock:
        started = time.monotonic()
        assert closed_by_server(sock, TIMEOUT + 5)
        assert time.monotonic() - started >= TIMEOUT - 0.5


def test_a_trickled_request_head_is_cut_at_the_header_timeout(guarded: ServerProcess) -> None:
    head = f"GET /v1/uhp HTTP/1.1\r\nHost: 127.0.0.1:{guarded.port}\r\n".encode()
    with socket.create_connection(("127.0.0.1", guarded.port)) as sock:
        started = time.monotonic()
        answer = b""
        for byte in head:  # one byte every 200 ms: progress, but never a whole head
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            readable, _, _ = select.select([sock], [], [], 0.2)
            if readable:
                answer = sock.recv(4096)
                break
        assert answer.startswith(b"HTTP/1.1 408"), answer
        error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
        assert error["code"] == "uhpserver_request_timeout"
        assert TIMEOUT - 0.5 <= time.monotonic() - started < TIMEOUT + 2


def test_a_stalled_body_is_cut_and_a_slow_one_is_not(guarded: ServerProcess) -> None:
    head = (
        f"POST /v1/harnesses HTTP/1.1\r\nHost: 127.0.0.1:{guarded.port}\r\n"
        f"Authorization: Bearer {API_KEY}\r\nContent-Type: application/json\r\n"
        "Content-Length: 64\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", guarded.port)) as sock:
        sock.sendall(head + b'{"base": ')
        started = time.monotonic()
        assert closed_by_server(sock, TIMEOUT + 5)
        assert time.monotonic() - started >= TIMEOUT - 0.5
    # A body that keeps coming, however slowly, is read to the end and answered.
    body = b'{"base": "nonexistent-base"}'
    body += b" " * (64 - len(body))
    with socket.create_connection(("127.0.0.1", guarded.port)) as sock:
        sock.sendall(head)
        for i in range(0, 64, 8):  # the whole body takes longer than the timeout
            sock.sendall(body[i : i + 8])
            time.sleep(TIMEOUT / 5)
        sock.settimeout(10)
        assert sock.recv(65536).split(b"\r\n")[0] == b"HTTP/1.1 422 Unprocessable Entity"


def test_streams_outlive_the_timeouts(guarded: ServerProcess) -> None:
    """A model that is silent for longer than both timeouts, and a feed with nothing to say:
    complete requests, never cut."""
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=guarded.url, headers=headers, timeout=60) as client:
        harness_id = client.get("/v1/harnesses").json()["harnesses"][0]["id"]
        with client.stream("GET", f"/v1/harnesses/{harness_id}/events") as feed:
            started = time.monotonic()
            for _line in feed.iter_lines():
                if time.monotonic() - started > 2 * TIMEOUT:
                    break  # still open, keep-alives flowing
        body = {"input": f"SLEEP {2 * TIMEOUT}\nSAY woke up", "stream": True}
        with client.stream("POST", "/v1/responses", json=body) as answer:
            lines = list(answer.iter_lines())
    assert time.monotonic() - started > 3 * TIMEOUT
    assert "event: response.completed" in lines


def test_at_the_cap_with_every_connection_busy_new_ones_get_a_fast_503_but_health_answers(
    tmp_path: Path, many_sockets: list[socket.socket]
) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "UHP_API_KEY": API_KEY,
        "UHP_BASES": "",
        "UHP_MAX_CONNECTIONS": "8",
        "UHP_REQUEST_BODY_TIMEOUT_SECONDS": "30",
    }
    small = ServerProcess(tmp_path, env).start()
    try:
        head = (
            f"POST /v1/harnesses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        ).encode()
        for _ in range(8):  # eight requests in progress: nothing idle to close
            sock = socket.create_connection(("127.0.0.1", small.port))
            sock.sendall(head)
            many_sockets.append(sock)
        time.sleep(0.5)
        refused = 0
        headers = {"Authorization": f"Bearer {API_KEY}"}
        for _ in range(20):
            started = time.monotonic()
            # The answer is written once the request line is read: a client may see the close
            # before its whole request went. Either way it is refused at once.
            with contextlib.suppress(httpx.TransportError):
                answer = httpx.get(f"{small.url}/v1/harnesses", headers=headers, timeout=5)
                assert answer.status_code == 503
                assert answer.json()["error"]["code"] == "uhpserver_overloaded"
                refused += 1
            assert time.monotonic() - started < 1.0
        assert refused >= 10
        # Liveness, readiness and discovery are answered all the same: a probe that failed
        # here would have an orchestrator restart a server that is only busy.
        for path in ("/healthz", "/readyz", "/v1/uhp"):
            for _ in range(5):
                assert httpx.get(f"{small.url}{path}", timeout=5).status_code == 200, path
        refusals = [line for line in small.log().splitlines() if "connection_cap_reached" in line]
        assert len(refusals) == 1
        for sock in many_sockets:
            sock.close()
        many_sockets.clear()
        time.sleep(0.5)
        assert httpx.get(f"{small.url}/v1/uhp", timeout=5).status_code == 200
    finally:
        small.stop()


def test_one_keys_streams_are_capped_and_leave_room_for_health_and_other_principals(
    tmp_path: Path, provider: RunningProvider, base_installed: Path
) -> None:
    env = server_env(provider, UHP_MAX_CONNECTIONS="12", UHP_MAX_STREAMS_PER_PRINCIPAL="3")
    server = ServerProcess(tmp_path, env).start()
    other_key = server.create_key("other")
    try:
        with contextlib.ExitStack() as held:
            mine = held.enter_context(
                httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"})
            )
            harness_id = mine.get("/v1/harnesses").json()["harnesses"][0]["id"]
            feed = f"/v1/harnesses/{harness_id}/events"
            for _ in range(3):  # the key's cap of event streams, held open
                opened = held.enter_context(mine.stream("GET", feed, timeout=30))
                assert opened.status_code == 200
            refused = mine.get(feed, timeout=10)
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "rate_limited"
            for path in ("/healthz", "/readyz", "/v1/uhp"):
                assert httpx.get(f"{server.url}{path}", timeout=5).status_code == 200, path
            theirs = held.enter_context(
                httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {other_key}"})
            )
            their_harness = theirs.get("/v1/harnesses").json()["harnesses"][0]["id"]
            with theirs.stream("GET", f"/v1/harnesses/{their_harness}/events", timeout=30) as own:
                assert own.status_code == 200
        # Streams closed: their places come back (once the server has seen the clients go).
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}
        ) as again:
            deadline = time.monotonic() + 10
            statuses = []
            while time.monotonic() < deadline:
                with again.stream("GET", feed, timeout=30) as reopened:
                    statuses.append(reopened.status_code)
                if statuses[-1] == 200:
                    break
                time.sleep(0.2)
            assert statuses[-1] == 200, statuses
    finally:
        server.stop()
