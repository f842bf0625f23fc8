"""Local sandbox limits end to end (issue 8, item 7): a memory hog, a fork bomb and a disk
filler, each the agent's own tool command (the scripted provider's RUN), end `failed` with
the limit named, while a turn in another session completes and the server stays up."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import API_KEY, TEST_SANDBOX, server_env
from tests.scripted_provider import RunningProvider
from tests.support.server import ServerProcess
from tests.test_tasks_e2e import create, message_text, wait_terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(TEST_SANDBOX != "local", reason="the local sandbox's limits"),
    pytest.mark.skipif(os.geteuid() != 0, reason="memory and process limits need root"),
]

OFFENDERS = {
    "memory": ("RUN python3 -c \"b = b'x' * (3 << 30)\"; sleep 20", "memory limit (768 MiB)"),
    # (Not a shell-function bomb: Hermes' terminal tool does not run those as sh does.)
    "processes": (
        "RUN python3 -c 'import os; [os.fork() for _ in iter(int, 1)]'",
        "process limit (256 processes)",
    ),
    "disk": (
        "RUN i=0; while true; do i=$((i+1)); head -c 8000000 /dev/zero > f$i; done",
        "workspace disk limit (256 MiB",
    ),
}


@pytest.fixture(scope="module")
def limited(
    tmp_path_factory: pytest.TempPathFactory, provider: RunningProvider, base_installed: Path
) -> Iterator[ServerProcess]:
    env = server_env(
        provider,
        UHP_LOCAL_SANDBOX_MEMORY="768m",
        UHP_LOCAL_SANDBOX_PIDS_LIMIT="256",
        UHP_LOCAL_SANDBOX_DISK="256m",
    )
    running = ServerProcess(tmp_path_factory.mktemp("limited"), env).start()
    yield running
    running.stop()


def test_each_limit_ends_its_turn_failed_and_harms_no_other(limited: ServerProcess) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=limited.url, headers=headers, timeout=120) as client:
        started = {
            name: create(client, {"input": script, "background": True})["id"]
            for name, (script, _) in OFFENDERS.items()
        }
        neighbour = create(client, {"input": "RUN sleep 2; echo calm\nSAY {output}"})
        assert neighbour["status"] == "completed"
        assert "calm" in message_text(neighbour)
        for name, (_, reason) in OFFENDERS.items():
            final = wait_terminal(client, started[name], timeout=90)
            assert final["status"] == "failed", (name, final)
            assert final["error"]["code"] == "harness_error"
            assert reason in final["error"]["message"], (name, final["error"])
        assert client.get("/v1/uhp").status_code == 200
