"""The sandbox's network end to end (issue 8, item 6): by default a tool command reaches
nothing on the host (the model provider, the server's API port, any other local service);
with an allow-list, the CLI still reaches its gateway (never through the proxy), its tool
commands reach an allowed host through the server's proxy and nothing else, and the server
logs each connection."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import API_KEY, server_env
from tests.scripted_provider import RunningProvider
from tests.support.server import ServerProcess
from tests.test_security_e2e import tool_outputs
from tests.test_tasks_e2e import create

pytestmark = pytest.mark.slow


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web() -> Iterator[int]:
    """A service on the host's loopback, standing in for a package registry."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture(scope="module")
def egress_server(
    tmp_path_factory: pytest.TempPathFactory, provider: RunningProvider, base_installed: Path
) -> Iterator[ServerProcess]:
    env = server_env(
        provider,
        UHP_EGRESS_ALLOW_HOSTS="127.0.0.1",
        UHP_EGRESS_ALLOW_PRIVATE_HOSTS="true",
    )
    running = ServerProcess(tmp_path_factory.mktemp("egress"), env).start()
    yield running
    running.stop()


def _status_via_proxy(url: str) -> str:
    """A command printing the status of GET `url` through $HTTP_PROXY, in plain bash."""
    return (
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128; "
        f'printf "GET {url} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" >&3; '
        'head -n 1 <&3 | cut -d " " -f 2\''
    )


def test_by_default_nothing_on_the_host_is_reachable(
    client: httpx.Client, server: ServerProcess, provider: Any, web: int
) -> None:
    ports = {
        "provider": urlsplit(provider.url).port,
        "api": server.port,
        "listener": web,
    }
    probes = "; ".join(
        f"(echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo {name}=reached"
        f" || echo {name}=refused"
        for name, port in ports.items()
    )
    result = create(client, {"input": f"RUN {probes}; echo proxy=${{HTTPS_PROXY:-none}}\nSAY ok"})
    assert result["status"] == "completed"  # the gateway, and only it, is there
    assert tool_outputs(result).split() == [
        "provider=refused",
        "api=refused",
        "listener=refused",
        "proxy=none",
    ]


def test_allowed_hosts_through_the_proxy_and_nothing_else(
    egress_server: ServerProcess, web: int
) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=egress_server.url, headers=headers, timeout=120) as client:
        script = (
            f"RUN echo proxy=$HTTPS_PROXY; {_status_via_proxy(f'http://127.0.0.1:{web}/simple')}; "
            f"{_status_via_proxy(f'http://localhost:{web}/simple')}; "
            f"(echo > /dev/tcp/127.0.0.1/{web}) 2>/dev/null || echo direct-refused"
        )
        result = create(client, {"input": script + "\nSAY {output}"})
    assert result["status"] == "completed"  # the CLI reached its gateway with proxies set
    assert tool_outputs(result).split() == [
        "proxy=http://127.0.0.1:3128",
        "204",
        "403",
        "direct-refused",
    ]
    logged = [json.loads(line) for line in egress_server.log().splitlines() if '"egress"' in line]
    # (A CLI may try hosts of its own through the proxy too, e.g. Hermes asks openrouter.ai
    # for model metadata: refused and logged like any other.)
    # A tunnel is logged when it closes (with its byte counts), so the refusal that follows it
    # may be logged first: the order of the two lines is not part of the contract.
    logged = sorted((e for e in logged if e["port"] == web), key=lambda e: e["host"])
    assert [(e["host"], e["port"], e["allowed"]) for e in logged] == [
        ("127.0.0.1", web, True),
        ("localhost", web, False),
    ]
    assert logged[0]["bytes_sent"] > 0 and logged[0]["bytes_received"] > 0
