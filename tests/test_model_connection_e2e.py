"""Per-turn model connections at the engine level: a front door's call to TaskService.submit,
the real Codex CLI, the scripted provider in Chat-Completions-only mode as the connection.

No front door exists yet, so the server runs in this process (uvicorn in a thread) and the
test calls `submit` on the server's own loop; results are read back over the public API."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from storage import keys
from tests.conftest import API_KEY, installed_tools
from tests.scripted_provider import RunningProvider, start_provider
from tests.scripted_provider.fixture import bind_loopback
from tests.support.written import everything_written
from uhp_server.app import create_app
from uhp_server.context import usable_bases
from uhp_server.doors.uhp.tasks import uhp_task
from uhp_server.errors import ApiError
from uhp_server.gateway.connection import ModelConnection
from uhp_server.gateway.scrubbing import scrubber
from uhp_server.settings import Settings

CONNECTION_KEY = "sk-connection-secret-4f9a1c"
RUN_TOKEN = "run-token-secret-77d2e0"
MODEL = "platform-model-1"
GENERATION = {"temperature": 0.25, "top_p": 0.5, "max_tokens": 333, "seed": 7}


class InProcessServer:
    """The real app on a loopback port, its loop in a thread, its log in a file."""

    def __init__(self, tmp_path: Path, base: str = "codex", **overrides: Any) -> None:
        sock = bind_loopback()
        port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.settings = Settings(
            data_dir=tmp_path / "data",
            port=port,
            api_key=API_KEY,
            bases=base,
            OPENAI_API_KEY=None,  # no configured provider: the connection is the only one
            ANTHROPIC_API_KEY=None,
            log_level="DEBUG",
            **overrides,
        )
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.log_path = tmp_path / "server.log"
        self._handler = logging.FileHandler(self.log_path)
        self._handler.setLevel(logging.DEBUG)
        self.app = create_app(self.settings, usable_bases(self.settings))
        self.loop = asyncio.new_event_loop()
        config = uvicorn.Config(self.app, log_level="debug", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, args=(sock,), daemon=True)

    def _run(self, sock: Any) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve(sockets=[sock]))

    def __enter__(self) -> InProcessServer:
        root = logging.getLogger()
        root.addHandler(self._handler)
        self._level = root.level
        root.setLevel(logging.DEBUG)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive()
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        root = logging.getLogger()
        root.removeHandler(self._handler)
        root.setLevel(self._level)
        self._handler.close()

    @property
    def ctx(self) -> Any:
        return self.app.state.ctx

    def submit(self, body: dict[str, Any], connection: ModelConnection) -> str:
        principal = self.ctx.db.run(keys.ensure_principal, keys.DEFAULT_PRINCIPAL)
        call = self.ctx.engine.start(
            replace(uhp_task(principal.id, body), model_connection=connection)
        )
        accepted = asyncio.run_coroutine_threadsafe(call, self.loop).result(30)
        return accepted.response_id

    def wait(self, response_id: str, timeout: float = 120) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = httpx.get(f"{self.url}/v1/responses/{response_id}", headers=headers).json()
            if current["status"] != "in_progress":
                return current
            time.sleep(0.2)
        raise AssertionError("task did not finish")


@pytest.fixture(scope="module")
def platform() -> Iterator[RunningProvider]:
    """The platform's model endpoint: Chat Completions only, a key and a run-token header."""
    with start_provider(
        CONNECTION_KEY, [MODEL], chat_only=True, required_headers={"X-Run-Token": RUN_TOKEN}
    ) as running:
        yield running


def connection(platform: RunningProvider, **changes: Any) -> ModelConnection:
    fields: dict[str, Any] = {
        "base_url": platform.base_url,
        "model": MODEL,
        "api_key": CONNECTION_KEY,
        "generation": GENERATION,
        "headers": {"X-Run-Token": RUN_TOKEN},
    }
    fields.update(changes)
    return ModelConnection(**fields)


@pytest.mark.slow
@pytest.mark.parametrize("base", ["codex", "hermes"])  # translated; passed through
def test_a_turn_runs_against_its_connection_and_leaves_no_secret(
    tmp_path: Path, platform: RunningProvider, base: str
) -> None:
    installed_tools(base)
    platform.reset()
    allowing = InProcessServer(tmp_path, base, model_connection_allow_private_hosts=True)
    with allowing as server:
        body = {"input": "RUN echo from-the-sandbox\nSAY ran {output}", "model": "ignored"}
        response_id = server.submit(body, connection(platform))
        result = server.wait(response_id)
        assert result["status"] == "completed", result
        assert result["model"] == MODEL
        assert "ran from-the-sandbox" in json.dumps(result["output"])
        assert len(server.ctx.tokens) == 0  # the grant, and the connection's key, are gone
        assert server.ctx.runs.get(response_id).plan.route is None
    calls = [r for r in platform.requests() if r["path"] == "/v1/chat/completions"]
    assert len(calls) >= 2  # the command, then the answer
    for call in calls:
        assert call["body"]["model"] == MODEL
        for name, value in GENERATION.items():
            assert call["body"][name] == value, name
        assert "max_completion_tokens" not in call["body"]
        assert call["headers"]["authorization"] == f"Bearer {CONNECTION_KEY}"
        assert call["headers"]["x-run-token"] == RUN_TOKEN
    assert not [r for r in platform.requests() if r["path"] != "/v1/chat/completions"]
    written = everything_written(tmp_path / "data") + server.log_path.read_bytes()
    assert server.log_path.stat().st_size > 0
    for secret in (CONNECTION_KEY, RUN_TOKEN):
        assert secret.encode() not in written, secret


def test_private_and_link_local_connections_are_refused(
    tmp_path: Path, platform: RunningProvider
) -> None:
    with InProcessServer(tmp_path) as server:
        with pytest.raises(ApiError) as caught:
            server.submit({"input": "SAY x"}, connection(platform))
        assert caught.value.status == 400
        assert caught.value.param == "model_connection.base_url"
        assert CONNECTION_KEY not in str(caught.value.__dict__)
        link_local = connection(platform, base_url="http://169.254.169.254/v1")
        with pytest.raises(ApiError):
            server.submit({"input": "SAY x"}, link_local)
        with pytest.raises(ApiError) as reserved:
            public = connection(
                platform, base_url="https://platform.example/v1", generation={"model": "x"}
            )
            server.submit({"input": "SAY x"}, public)
        assert reserved.value.param == "model_connection.generation.model"
        headers = {"Authorization": f"Bearer {API_KEY}"}
        sessions = httpx.get(f"{server.url}/v1/sessions", headers=headers).json()
        assert sessions["sessions"] == []  # nothing was accepted
    allowing = InProcessServer(tmp_path / "b", model_connection_allow_private_hosts=True)
    with allowing as server, pytest.raises(ApiError):  # link-local stays refused
        server.submit({"input": "SAY x"}, connection(platform, base_url="http://[fe80::1]/v1"))


@pytest.mark.slow
@pytest.mark.parametrize("base", ["codex", "hermes"])  # translated; passed through
def test_a_provider_echoing_the_key_in_any_encoding_leaves_it_nowhere(
    tmp_path: Path, platform: RunningProvider, base: str
) -> None:
    """The red team's reproduction (issue 27): the provider's error echoes the connection's
    key with characters as JSON escapes (and percent-encoded, and in base64); the agent CLI
    decodes it, so anything short of scrubbing every form hands the key on."""
    installed_tools(base)
    platform.reset()
    allowing = InProcessServer(tmp_path, base, model_connection_allow_private_hosts=True)
    with allowing as server:
        echo = "FAIL 400 Incorrect API key {key:escaped} (url {key:url}, basic {key:base64})"
        response_id = server.submit({"input": echo}, connection(platform))
        result = server.wait(response_id)
        assert result["status"] == "failed", result
        stored = json.dumps(result)
    assert [r for r in platform.requests() if r["path"] == "/v1/chat/completions"]
    written = everything_written(tmp_path / "data") + server.log_path.read_bytes()
    database = b"".join(p.read_bytes() for p in (tmp_path / "data").glob("uhp.sqlite3*"))
    assert database  # the database and its write-ahead log are among what was read
    homes = list((tmp_path / "data" / "sessions").rglob("*"))
    assert any(p.is_file() for p in homes)  # so is the agent's own home folder
    for where in (stored.encode(), written, database):
        assert CONNECTION_KEY.encode() not in where
        assert scrubber([CONNECTION_KEY]).scrub(where) == where  # in no encoding either
    assert "Incorrect API key [redacted]" in stored  # the error reached the turn, scrubbed
