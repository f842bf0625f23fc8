"""The docker sandbox under a real server and the real CLI: what the agent's container holds,
and that no way a turn can end leaves a container behind (cancel, step budget, time budget,
a crashed CLI, a killed server). The shared end-to-end files also run in full against this
backend (UHP_TEST_SANDBOX=docker, scripts/test.sh)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_bases.codex.install import CLI_VERSION
from tests.conftest import API_KEY, PROVIDER_KEY, server_env
from tests.support.docker import (
    TEST_DOCKER_RUNTIME,
    containers_of,
    engine_or_skip,
    runs_turn,
    runtime_image_or_skip,
)
from tests.support.server import ServerProcess
from tests.test_sessions_e2e import first_delta
from tests.test_tasks_e2e import create, message_text, wait_terminal
from uhp_server.sandbox.docker.container import seccomp_option

pytestmark = pytest.mark.slow

SECRETS = (PROVIDER_KEY, API_KEY, "server-secret-do-not-leak")
GVISOR = TEST_DOCKER_RUNTIME == "runsc"
SCAN_PARTS = 4  # the commands a scan of the container's files is split into


def split(secret: str) -> str:
    """The secret as a shell word that does not contain it, so the prompt (which the CLI
    stores in its transcript) cannot be what a search finds."""
    middle = len(secret) // 2
    return f"'{secret[:middle]}''{secret[middle:]}'"


@pytest.fixture(scope="module")
def docker_server(
    tmp_path_factory: pytest.TempPathFactory, provider: Any, codex_installed: Path
) -> Iterator[ServerProcess]:
    runtime_image_or_skip()
    env = server_env(provider, UHP_SANDBOX="docker", UHP_BASES="codex")
    running = ServerProcess(tmp_path_factory.mktemp("docker-server"), env).start()
    yield running
    running.stop()


@pytest.fixture
def client(docker_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=docker_server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
    ) as http:
        yield http


def no_containers_left(data_dir: Path, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while containers_of(data_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert containers_of(data_dir) == []


def live_container(data_dir: Path, response_id: str) -> dict[str, Any]:
    api = engine_or_skip()
    deadline = time.monotonic() + 10  # a ready pool's container is renamed just after start
    while time.monotonic() < deadline:
        for summary in containers_of(data_dir, running_only=True):
            if runs_turn(summary, response_id):
                return api.inspect_container(summary["Id"])
        time.sleep(0.1)
    raise AssertionError(f"no running container for {response_id}")


def test_a_turns_container_is_hardened_labelled_and_holds_only_its_token(
    client: httpx.Client, docker_server: ServerProcess
) -> None:
    running = create(client, {"input": "SLOW 20\nSAY " + "word " * 60, "background": True})
    first_delta(client, running["id"])
    info = live_container(docker_server.data_dir, running["id"])
    client.post(f"/v1/responses/{running['id']}/cancel")
    labels = info["Config"]["Labels"]
    if "uhp.slot" in labels:  # a ready pool's, made before its turn: named after it
        assert info["Name"] == f"/uhp-{running['id']}"
    else:
        assert labels["uhp.session"] == running["metadata"]["session_id"]
        assert labels["uhp.base"] == f"codex@{CLI_VERSION}"
    host = info["HostConfig"]
    assert (host["NetworkMode"], host["ReadonlyRootfs"], host["CapDrop"]) == (
        "none",
        True,
        ["ALL"],
    )
    assert host["SecurityOpt"] == ["no-new-privileges", seccomp_option(gvisor=GVISOR)]
    assert info["Config"]["User"] not in ("", "0", "root", "0:0")
    env = dict(item.split("=", 1) for item in info["Config"]["Env"])
    assert not any(secret in value for value in env.values() for secret in SECRETS)
    credentials = {name for name in env if any(w in name for w in ("KEY", "TOKEN", "SECRET"))}
    assert credentials == {"UHP_GATEWAY_TOKEN"}
    assert not any(name.startswith(("OPENAI_", "ANTHROPIC_")) for name in env)
    no_containers_left(docker_server.data_dir)


def test_no_file_in_the_container_holds_a_secret(
    client: httpx.Client, codex_installed: Path
) -> None:
    patterns = " ".join(f"-e {split(secret)}" for secret in SECRETS)
    # The pinned CLIs (2 GB, the host's tools folder mounted read-only) are scanned here, on
    # the host: inside, reading them takes 8 s with runc on a quiet machine and 25 s in gVisor,
    # past the time the CLI waits for a command's output.
    found_in_tools = subprocess.run(
        ["grep", "-rIl", *(arg for secret in SECRETS for arg in ("-e", secret)), "."],
        cwd=codex_installed,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found_in_tools.returncode == 1, found_in_tools.stdout  # 1: nothing found
    # Every other file is scanned inside, in SCAN_PARTS commands (each path in the one its
    # length picks: files the CLI writes meanwhile move none of the others), each let wait for
    # its output as long as the CLI allows (TIMEOUT: Codex's 30 s, where its default 10 s left
    # a part unseen in gVisor on a busy machine), so that none outlasts it.
    files = (
        "find / \\( -path /proc -o -path /sys -o -path /opt/uhp-tools \\) -prune"
        " -o -type f -print 2>/dev/null"
    )
    runs = "\n".join(
        f"RUN {files} | awk 'length($0) % {SCAN_PARTS} == {part}'"
        f" | xargs -r -d '\\n' grep -Il {patterns} 2>/dev/null; echo scanned-{part}"
        for part in range(SCAN_PARTS)
    )
    result = create(client, {"input": f"TIMEOUT 30\n{runs}\nSAY {{outputs}}"})
    assert message_text(result).strip() == " | ".join(
        f"scanned-{part}" for part in range(SCAN_PARTS)
    )


def test_cancel_budgets_and_a_crash_leave_no_container(
    client: httpx.Client, docker_server: ServerProcess
) -> None:
    data_dir = docker_server.data_dir
    running = create(client, {"input": "SLOW 20\nSAY " + "word " * 60, "background": True})
    first_delta(client, running["id"])
    assert client.post(f"/v1/responses/{running['id']}/cancel").json()["status"] == "cancelled"
    no_containers_left(data_dir)

    budget = create(client, {"input": "LOOP", "max_step": 1})
    assert budget["incomplete_details"]["reason"] == "max_step"
    no_containers_left(data_dir)

    slow = create(client, {"input": "SLOW 60\nSAY " + "slow " * 20, "timeout_seconds": 8})
    assert slow["incomplete_details"]["reason"] == "timeout_seconds"
    no_containers_left(data_dir)

    crashed = create(client, {"input": "RUN kill -9 $PPID; sleep 5\nSAY unreachable"})
    assert crashed["status"] == "failed"
    no_containers_left(data_dir)


def test_a_killed_server_leaves_no_running_container_and_its_successor_reaps(
    tmp_path: Path, provider: Any, codex_installed: Path
) -> None:
    runtime_image_or_skip()
    env = server_env(provider, UHP_SANDBOX="docker", UHP_BASES="codex")
    first = ServerProcess(tmp_path, env).start()
    try:
        with httpx.Client(
            base_url=first.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60
        ) as http:
            running = create(http, {"input": "SLOW 30\nSAY " + "on " * 80, "background": True})
            first_delta(http, running["id"])
            assert live_container(tmp_path, running["id"])
    finally:
        first.stop(signal.SIGKILL)
    # The attach went with the server: the CLI read end-of-file, and its container ended, as
    # did the ready pool's (their shells wait on the same attach).
    deadline = time.monotonic() + 20
    while containers_of(tmp_path, running_only=True, ready_slots=True):
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert containers_of(tmp_path, running_only=True, ready_slots=True) == []
    second = ServerProcess(tmp_path, env).start()
    try:
        # Nothing left, not even a stopped one (the new server has no ready slot yet: it
        # fills a principal's at their first turn).
        assert containers_of(tmp_path, ready_slots=True) == []
        with httpx.Client(
            base_url=second.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60
        ) as http:
            after = wait_terminal(http, running["id"])
            assert after["status"] == "failed"
            follow = create(http, {"input": "SAY next", "previous_response_id": running["id"]})
            assert message_text(follow) == "next"
    finally:
        second.stop()
    assert containers_of(tmp_path, ready_slots=True) == []
