"""Headers a client controls, on every route of the app: Allow on a 405 names every method the
path serves, and no header value, however malformed, gets anything but a 4xx envelope.

No agent CLI is needed. Raw header bytes go to a real server over httpx: the in-process
TestClient re-encodes header values, so bytes that are not UTF-8 never reach the app."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette

from tests.support.schema import validate
from tests.support.server import ServerProcess
from uhp_server.app import create_app
from uhp_server.http.route_table import served_routes
from uhp_server.settings import Settings

KEY = "uhp_sk_headers_test"
AUTH = {"Authorization": f"Bearer {KEY}"}
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data_dir = tmp_path_factory.mktemp("headers") / "data"
    app = create_app(Settings(data_dir=data_dir, api_key=KEY), bases={})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real server (no bases: nothing here runs a task)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "UHP_API_KEY": KEY,
        "UHP_BASES": "",
    }
    running = ServerProcess(tmp_path_factory.mktemp("headers-live"), env).start()
    yield running
    running.stop()


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def app_paths(client: TestClient) -> dict[str, set[str]]:
    """Every concrete path of the app, with the methods of every route that serves it."""
    assert isinstance(client.app, Starlette)
    routes = [r for r in served_routes(client.app) if r.methods]
    served: dict[str, set[str]] = {}
    for path in {concrete(r.path) for r in routes}:
        served[path] = set().union(*(r.methods for r in routes if r.path_regex.match(path)))
    return served


def is_envelope(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    validate("ErrorEnvelope", body)
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]


def test_every_405_names_every_method_its_path_serves(http: TestClient) -> None:
    served = app_paths(http)
    assert {"GET", "POST"} <= served["/v1/harnesses"]
    assert {"GET", "DELETE"} <= served["/v1/responses/x1"]
    checked = 0
    for path, routed in served.items():
        methods = routed | {"HEAD"} if "GET" in routed else routed  # HEAD wherever GET is
        for method in METHODS:
            if method in methods:
                continue
            response = http.request(method, path, headers=AUTH)
            if method == "HEAD":
                assert response.status_code == 405
            else:
                is_envelope(response, 405, "uhpserver_method_not_allowed")
            allow = {m.strip() for m in response.headers["allow"].split(",")}
            assert allow == methods, f"{method} {path}"
            checked += 1
    assert checked > 50


def test_the_cases_the_issue_names(http: TestClient) -> None:
    allow = http.options("/v1/harnesses", headers=AUTH).headers["allow"]
    assert {"GET", "POST"} <= set(allow.split(", "))
    allow = http.put("/v1/responses/resp_x", headers=AUTH).headers["allow"]
    assert {"GET", "DELETE"} <= set(allow.split(", "))


def test_a_uhp_version_that_is_not_utf8_is_refused_with_the_envelope(
    live: ServerProcess,
) -> None:
    for value in (b"\xff\xfe", b"2026-08-11\xc3", b"\x80"):
        response = httpx.get(f"{live.url}/v1/uhp", headers=[(b"UHP-Version", value)])
        error = is_envelope(response, 400, "unsupported_protocol_version")
        assert error["param"] == "UHP-Version"


@pytest.mark.parametrize("length", [71, 256, 257, 300, 4000])
def test_a_multipart_boundary_of_any_length_is_answered_4xx(http: TestClient, length: int) -> None:
    boundary = "b" * length
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\nhello\r\n--{boundary}--\r\n"
    ).encode()
    content_type = f"multipart/form-data; boundary={boundary}"
    response = http.post("/v1/files", content=body, headers={**AUTH, "Content-Type": content_type})
    if length <= 256:  # what the parser takes; any such boundary works end to end
        assert response.status_code == 200, response.text
        assert response.json()["bytes"] == 5
    else:
        assert is_envelope(response, 400, "invalid_input")["param"] == "Content-Type"


HEADER_NAMES = [
    "UHP-Version",
    "Authorization",
    "Content-Type",
    "Idempotency-Key",
    "Last-Event-ID",
    "Accept",
    "Accept-Encoding",
    "Range",
    "If-None-Match",
    "Cookie",
    "Origin",
    "X-Forwarded-For",
    "X-Forwarded-Proto",
]
RAW_VALUES = [
    b"\xff\xfe\xfd",
    b"\xc3(",
    b"\x80abc",
    b"Bearer \xff" + KEY.encode(),
    b"multipart/form-data; boundary=" + b"\xff" * 300,
    b"application/json; charset=\xff",
    b"-1",
    b"99999999999999999999999",
    b"bytes=\xff-",
    b"x" * 8000,
]


@pytest.mark.heavy
def test_raw_header_bytes_on_every_route_never_give_a_5xx(
    http: TestClient, live: ServerProcess
) -> None:
    """Each header, each value, each route and method the app serves (authenticated, so the
    value reaches the route); every answer is below 500 and an envelope on /v1 routes."""
    failures = []
    with httpx.Client(base_url=live.url, timeout=30) as client:
        for path, methods in app_paths(http).items():
            for method in sorted(methods - {"HEAD"}):
                for name in HEADER_NAMES:
                    for value in RAW_VALUES:
                        response = client.request(
                            method, path, headers=fuzzed(name, value), content=b"{}"
                        )
                        if response.status_code >= 500:
                            failures.append((method, path, name, value[:40], response.status_code))
                        elif response.status_code >= 400 and path.startswith("/v1/"):
                            validate("ErrorEnvelope", response.json())
    assert failures == []


def fuzzed(name: str, value: bytes) -> list[tuple[bytes, bytes]]:
    headers = [] if name == "Authorization" else [(b"Authorization", f"Bearer {KEY}".encode())]
    return [*headers, (name.encode(), value)]


UNPARSABLE = [
    b"GET /v1/uhp HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n",
    b"GARBAGE\r\n\r\n",
    b"GET /v1/uhp HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"GET /v1/uhp HTTP/1.1\r\nHost: x\r\nBad Header Name: 1\r\n\r\n",
]


def raw_exchange(server: ServerProcess, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize("request_bytes", UNPARSABLE)
def test_a_request_that_is_not_http_gets_the_envelope(
    live: ServerProcess, request_bytes: bytes
) -> None:
    head, _, body = raw_exchange(live, request_bytes).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/json" in head.lower()
    error = json.loads(body)["error"]
    validate("ErrorEnvelope", {"error": error})
    assert error["code"] == "invalid_input"
    assert error["detail"]["correlation_id"] in live.log()


def test_unparsable_requests_warn_once_a_minute_not_each(live: ServerProcess) -> None:
    """Each still has its one structured line (its correlation id), as every 4xx does."""
    for _ in range(30):
        raw_exchange(live, b"GARBAGE\r\n\r\n")
    warnings = [line for line in live.log().splitlines() if line.startswith("WARNING")]
    assert len(warnings) <= 1, warnings
