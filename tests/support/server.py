"""Run a real `uhp-server serve` in a subprocess, the way a user starts it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import postgres


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    data_dir: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    preexec: Callable[[], None] | None = None  # run in the child first, e.g. to lower a limit

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The started server's process id."""
        assert self.proc is not None, "the server is not started"
        return self.proc.pid

    @property
    def database(self) -> str:
        """The URL of the database it stores in (for tests that look at the rows)."""
        return self.env.get("UHP_DATABASE_URL") or f"sqlite:///{self.data_dir / 'uhp.sqlite3'}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        self.log_path = self.data_dir / f"server-{self.port}.log"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (kept open for the child's lifetime)
        if postgres.current is not None and "UHP_DATABASE_URL" not in self.env:
            self.env = {**self.env, "UHP_DATABASE_URL": postgres.current.url_for(self.data_dir)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uhp_server.cli",
                "serve",
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=self.preexec,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/v1/uhp", timeout=1).status_code == 200:
                    self._name_the_agent_of_every_principal_known()
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"server did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def create_key(self, principal: str) -> str:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "uhp_server.cli",
                "keys",
                "create",
                "--principal",
                principal,
                "--data-dir",
                str(self.data_dir),
            ],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        key = out.split()[-1]
        if self.proc is not None and self.proc.poll() is None:
            self.name_the_agent(key)
        return key

    def _name_the_agent_of_every_principal_known(self) -> None:
        """The default principal's and a door's (AgentOS runs as the one it is configured
        with, which has no key until a test makes one)."""
        from tests.support.base_under_test import ACP, BASE

        if BASE.base_config is None or self.env.get("UHP_BASES") != ACP:
            return
        if api_key := self.env.get("UHP_API_KEY"):
            self.name_the_agent(api_key)
        if door_principal := self.env.get("UHP_AGENTOS_PRINCIPAL"):
            self.create_key(door_principal)

    def name_the_agent(self, key: str) -> None:
        """On a server that runs only the `acp` base with the ACP test agent under test
        (UHP_TEST_ACP_AGENT): the principal's default harness names that agent, as the
        default harness of any other base runs its CLI (tests/support/base_under_test.py)."""
        from tests.support.base_under_test import ACP, BASE

        if BASE.base_config is None or self.env.get("UHP_BASES") != ACP:
            return
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=self.url, headers=auth, timeout=30) as http:
            listed = http.get("/v1/harnesses")
            listed.raise_for_status()
            default = next(h for h in listed.json()["harnesses"] if h["base"] == ACP)
            body = {"name": default["name"], "uhpserver_baseConfig": BASE.base_config}
            http.put(f"/v1/harnesses/{default['id']}", json=body).raise_for_status()

    def revoke_key(self, key: str) -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "uhp_server.cli",
                "keys",
                "revoke",
                key,
                "--data-dir",
                str(self.data_dir),
            ],
            env=self.env,
            check=True,
            capture_output=True,
        )


def query(database: str, statement: str, **params: object) -> list[tuple[object, ...]]:
    """Rows of one SQL statement (`:name` parameters) on a server's database, whichever it is."""
    from sqlalchemy import create_engine, text

    from storage.db import sqlalchemy_url

    engine = create_engine(sqlalchemy_url(database))
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(statement), params)]
    finally:
        engine.dispose()
