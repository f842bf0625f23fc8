"""Several `uhp-server serve` replicas on one PostgreSQL database and one shared data
directory, behind a real haproxy (Debian's; scripts/haproxy.sh installs it), the way a team
deploys them. `UHP_TEST_REPLICAS=2` makes the `server` fixture one of these, so the end-to-end
files run through the balancer unchanged.

The balancer's configuration is written per run: round-robin over the replicas, each request
balanced on its own (`option http-server-close`), hour-long timeouts so an SSE stream that only
carries keep-alive comments stays open, and a health check on `/readyz` every half second so a
replica killed with `-9` leaves the rotation within about a second. Every answer names the
replica that served it (`X-Served-By: r0`), and a request may pin a replica with
`X-Test-Replica: r1` (tests read a stream from the replica that does not run the turn, still
through the balancer).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.postgres import Databases
from tests.support.server import ServerProcess, free_port

SERVED_BY = "X-Served-By"
PIN_REPLICA = "X-Test-Replica"


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise RuntimeError("haproxy is not installed: run `sudo bash scripts/haproxy.sh`")
    return found


def replica_name(index: int) -> str:
    return f"r{index}"


def haproxy_config(port: int, replica_ports: list[int]) -> str:
    servers = "\n".join(
        f"  server {replica_name(i)} 127.0.0.1:{p} check" for i, p in enumerate(replica_ports)
    )
    pins = "\n".join(
        f"  use-server {replica_name(i)} if {{ req.hdr({PIN_REPLICA}) -m str {replica_name(i)} }}"
        for i in range(len(replica_ports))
    )
    return f"""\
global
  maxconn 4096

defaults
  mode http
  option http-server-close
  # Event streams: send each small write at once instead of waiting to fill a packet
  # (without it, SSE events reached clients in bursts of ~240 ms).
  option http-no-delay
  option redispatch
  retries 2
  timeout connect 2s
  timeout client 1h
  timeout server 1h
  timeout tunnel 1h
  timeout http-request 30s
  timeout http-keep-alive 10s

frontend uhp
  bind 127.0.0.1:{port}
  default_backend replicas

backend replicas
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1
  http-response set-header {SERVED_BY} %s
{pins}
{servers}
"""


@dataclass
class Replicas:
    """N replicas behind haproxy; quacks like ServerProcess where the tests use one (`url`,
    `data_dir`, `env`, `database`, `create_key`, `log`, `stop`)."""

    data_dir: Path
    env: dict[str, str]
    count: int = 2
    port: int = field(default_factory=free_port)
    replicas: list[ServerProcess] = field(default_factory=list)
    haproxy: subprocess.Popen[bytes] | None = None
    # Outside the data directory: tests find a server's agents by its path on command lines.
    haproxy_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="haproxy-")))
    _databases: Databases | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def database(self) -> str:
        return self.env["UHP_DATABASE_URL"]

    def start(self, timeout: float = 60.0) -> Replicas:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if "UHP_DATABASE_URL" not in self.env:
            self._databases = Databases()
            self.env = {**self.env, "UHP_DATABASE_URL": self._databases.url_for(self.data_dir)}
        # One data directory, so each names itself (the id it would keep there is shared).
        self.replicas = [
            ServerProcess(self.data_dir, {"UHP_REPLICA_ID": replica_name(i), **self.env})
            for i in range(self.count)
        ]
        try:
            # At once, as a deployment starts them (migrations take turns on an advisory lock).
            with ThreadPoolExecutor(self.count) as starting:
                for started in starting.map(lambda r: r.start(timeout), self.replicas):
                    wait_ready(started.url, timeout)
            self._start_haproxy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_haproxy(self, timeout: float) -> None:
        config = self.haproxy_dir / "haproxy.cfg"
        config.write_text(haproxy_config(self.port, [r.port for r in self.replicas]))
        log = open(self.haproxy_dir / "haproxy.log", "ab")  # noqa: SIM115
        self.haproxy = subprocess.Popen(
            [haproxy_binary(), "-db", "-f", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # Ready once every replica answers through it (its first health checks passed).
        deadline = time.monotonic() + timeout
        for replica in range(self.count):
            while True:
                if self.haproxy.poll() is not None:
                    raise RuntimeError(f"haproxy exited:\n{self.log()}")
                try:
                    got = httpx.get(
                        f"{self.url}/readyz", headers={PIN_REPLICA: replica_name(replica)}
                    )
                    if got.status_code == 200 and self.served_by(got) == replica_name(replica):
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the balancer did not become ready:\n{self.log()}")
                time.sleep(0.1)

    @staticmethod
    def served_by(response: httpx.Response) -> str:
        return response.headers[SERVED_BY]

    def replica(self, name: str) -> ServerProcess:
        return self.replicas[int(name.removeprefix("r"))]

    def pin(self, name: str) -> dict[str, str]:
        """Headers that route a request through the balancer to replica `name`."""
        return {PIN_REPLICA: name}

    def kill(self, name: str) -> None:
        """`kill -9` of the replica's server process alone (not its process group): whatever
        it started must end by itself, as on a real crash."""
        proc = self.replica(name).proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def create_key(self, principal: str) -> str:
        return self.replicas[0].create_key(principal)

    def log(self) -> str:
        logs = sorted(self.haproxy_dir.glob("*.log")) + sorted(self.data_dir.glob("server-*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')}" for p in logs)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        for replica in self.replicas:
            replica.stop(sig)
            if replica.proc is not None:
                # What a replica killed with -9 may have left in its process group.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(replica.proc.pid, signal.SIGKILL)
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.terminate()
            try:
                self.haproxy.wait(10)
            except subprocess.TimeoutExpired:
                self.haproxy.kill()
                self.haproxy.wait(5)
        shutil.rmtree(self.haproxy_dir, ignore_errors=True)
        if self._databases is not None:
            self._databases.drop_all()
            self._databases = None


def wait_ready(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url}/readyz never answered 200")
