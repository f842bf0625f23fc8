"""After a restart every stored response reads back unchanged, and nothing stays running."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, server_env
from tests.support import passes
from tests.support.schema import check_stream
from tests.support.server import ServerProcess
from tests.support.sse import read_stream
from tests.test_sessions_e2e import first_delta, wait_no_agents
from tests.test_tasks_e2e import create, message_text

pytestmark = pytest.mark.slow


def _client(server: ServerProcess) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
    )


@passes.same_on_every_base
@passes.same_in_every_sandbox
def test_stored_responses_survive_a_restart_unchanged(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    env = server_env(provider)
    first = ServerProcess(tmp_path, env).start()
    try:
        with _client(first) as client:
            done = create(client, {"input": "RUN echo persisted\nSAY {output}"})
            events = read_stream(client, "GET", f"/v1/responses/{done['id']}?stream=true").events
    finally:
        first.stop()
    second = ServerProcess(tmp_path, env).start()
    try:
        with _client(second) as client:
            assert client.get(f"/v1/responses/{done['id']}").json() == done
            again = read_stream(client, "GET", f"/v1/responses/{done['id']}?stream=true").events
            assert again == events
            follow = create(
                client, {"input": "RECALL\nSAY continued", "previous_response_id": done["id"]}
            )
            assert message_text(follow) == "continued"
    finally:
        second.stop()


@passes.same_on_every_base
def test_a_task_running_when_the_server_dies_ends_failed_with_its_partial_output(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    env = server_env(provider)
    first = ServerProcess(tmp_path, env).start()
    try:
        with _client(first) as client:
            running = create(
                client, {"input": "SLOW 20\nSAY " + "partial " * 50, "background": True}
            )
            first_delta(client, running["id"])
            time.sleep(0.5)
    finally:
        first.stop(signal.SIGKILL)
    wait_no_agents(tmp_path)  # the sandbox died with the server
    second = ServerProcess(tmp_path, env).start()
    try:
        with _client(second) as client:
            after = client.get(f"/v1/responses/{running['id']}").json()
            assert after["status"] == "failed"
            assert after["error"]["code"] == "harness_error"
            assert message_text(after).startswith("partial")
            stream = read_stream(client, "GET", f"/v1/responses/{running['id']}?stream=true")
            assert check_stream(stream.events) == after
            follow = create(client, {"input": "SAY next", "previous_response_id": running["id"]})
            assert follow["status"] == "completed"
    finally:
        second.stop()
