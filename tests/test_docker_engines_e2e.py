"""The docker sandbox on two real engines of this machine (UHP_DOCKER_HOSTS): the default one
and a second dockerd of its own (scripts/docker-engine.sh 2). Turns spread over both; engine
2 stopped mid-turn fails the turn there naming it while the server stays ready and runs new
turns on engine 1; engine 2 started again joins, its leftovers reaped, and takes turns."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import requests.exceptions
from starlette.types import Receive, Scope, Send

from harness_bases.base import Invocation
from tests.conftest import API_KEY, server_env
from tests.support.docker import runs_turn, runtime_image_or_skip, server_id
from tests.support.server import ServerProcess
from tests.test_sessions_e2e import first_delta
from tests.test_tasks_e2e import create, wait_terminal
from uhp_server.sandbox.base import SessionMounts
from uhp_server.sandbox.docker import DockerSandbox, engines

pytestmark = pytest.mark.slow

ENGINE_1 = "unix:///var/run/docker.sock"
ENGINE_2 = "unix:///run/uhp-docker2.sock"
SCRIPT = Path(__file__).parent.parent / "scripts" / "docker-engine.sh"


def engine_2(action: str = "start") -> None:
    subprocess.run(["bash", str(SCRIPT), "2", action], check=True, capture_output=True)


@pytest.fixture(scope="module")
def second_engine() -> Iterator[Any]:
    runtime_image_or_skip()  # engine 1 answers and has the image engine 2 gets a copy of
    try:
        engine_2()
    except subprocess.CalledProcessError as exc:
        message = f"\n*** ENGINE 2 TESTS SKIPPED: {SCRIPT.name} 2 failed: {exc.stderr} ***\n"
        pytest.skip(message)
    yield docker.APIClient(base_url=ENGINE_2, timeout=30)
    engine_2()  # left running, as found


@pytest.fixture
def server(
    tmp_path: Path, provider: Any, codex_installed: Path, second_engine: Any
) -> Iterator[ServerProcess]:
    env = server_env(
        provider,
        UHP_SANDBOX="docker",
        UHP_BASES="codex",
        UHP_DOCKER_HOSTS=f"{ENGINE_1},{ENGINE_2}",
    )
    running = ServerProcess(tmp_path, env).start(timeout=180)  # may copy the image first
    yield running
    running.stop()


def engine_of(data_dir: Path, response_id: str) -> str:
    """Which engine runs the container of turn `response_id`: labelled with it, or (a ready
    pool's container, made before its turn was known) named after it."""
    deadline = time.monotonic() + 10  # a pooled container is renamed just after its start
    while time.monotonic() < deadline:
        for url in (ENGINE_1, ENGINE_2):
            try:
                containers = ours(url, data_dir)
            except requests.exceptions.ConnectionError:
                continue  # engine 2, stopped: the turn is not there
            if any(runs_turn(container, response_id) for container in containers):
                return url
        time.sleep(0.1)
    raise AssertionError(f"no container runs {response_id}")


def ours(url: str, data_dir: Path) -> list[dict[str, Any]]:
    api = docker.APIClient(base_url=url, timeout=30)
    return api.containers(all=True, filters={"label": f"uhp.server={server_id(data_dir)}"})


def slow_turn(http: httpx.Client, seconds: int) -> str:
    running = create(http, {"input": f"SLOW {seconds}\nSAY " + "on " * 60, "background": True})
    return running["id"]


def test_turns_spread_a_lost_engine_fails_its_turn_and_rejoins_reaped(
    server: ServerProcess, second_engine: Any
) -> None:
    data_dir = server.data_dir
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60
    ) as http:
        # Two turns at once: one on each engine (the less loaded one takes the next turn).
        first, second = slow_turn(http, 20), slow_turn(http, 20)
        for response_id in (first, second):
            first_delta(http, response_id)
        placed = {engine_of(data_dir, first): first, engine_of(data_dir, second): second}
        assert set(placed) == {ENGINE_1, ENGINE_2}
        on_1, on_2 = placed[ENGINE_1], placed[ENGINE_2]

        # A container of this server that engine 2 keeps through its outage (live-restore):
        # only a reap when engine 2 joins again removes it.
        image = second_engine.inspect_container(ours(ENGINE_2, data_dir)[0]["Id"])["Image"]
        planted = second_engine.create_container(
            image,
            command=["sleep", "600"],
            labels={"uhp.server": server_id(data_dir)},
            host_config=second_engine.create_host_config(network_mode="none"),
        )["Id"]
        second_engine.start(planted)

        engine_2("stop")
        lost = wait_terminal(http, on_2)
        assert lost["status"] == "failed"
        assert ENGINE_2 in lost["error"]["message"], lost["error"]
        assert http.get("/readyz").status_code == 200
        # New turns go to engine 1; the turn there was never disturbed.
        third = slow_turn(http, 3)
        first_delta(http, third)
        assert engine_of(data_dir, third) == ENGINE_1
        assert wait_terminal(http, third)["status"] == "completed"
        assert wait_terminal(http, on_1)["status"] == "completed"

        engine_2()
        deadline = time.monotonic() + 60
        while ours(ENGINE_2, data_dir) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert ours(ENGINE_2, data_dir) == []  # the planted container and the lost turn's
        # Back in rotation: two turns at once spread over both engines again.
        deadline = time.monotonic() + 30
        while True:
            pair = slow_turn(http, 4), slow_turn(http, 4)
            for response_id in pair:
                first_delta(http, response_id)
            engines = {engine_of(data_dir, response_id) for response_id in pair}
            for response_id in pair:
                assert wait_terminal(http, response_id)["status"] == "completed"
            if engines == {ENGINE_1, ENGINE_2} or time.monotonic() > deadline:
                break  # joining finishes (image check) just after the reap
        assert engines == {ENGINE_1, ENGINE_2}


def bridge_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def test_starting_the_second_engine_leaves_the_first_engines_bridge(second_engine: Any) -> None:
    """A dockerd started with `--bridge=none` deletes the interface named docker0, engine 1's
    default bridge: every build and bridged container on engine 1 then failed (the compose
    test did, in CI). Engine 2 has a bridge of its own instead."""
    assert bridge_exists("docker0"), "engine 1's default bridge is missing before the test"
    engine_2("stop")
    engine_2("start")
    assert bridge_exists("docker0")


async def gateway_app(scope: Scope, receive: Receive, send: Send) -> None:
    """No turn here calls the gateway."""


async def test_a_turn_placed_on_an_engine_that_just_went_away_starts_on_the_next(
    tmp_path: Path, second_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No health probe gets there first: the turn's own create call finds engine 2 gone.
    monkeypatch.setattr(engines, "HEALTH_INTERVAL_SECONDS", 3600.0)
    image = runtime_image_or_skip()
    sandbox = DockerSandbox(tmp_path / "data", image=image, hosts=f"{ENGINE_1},{ENGINE_2}")
    await sandbox.open(gateway_app)
    mounts = SessionMounts(tmp_path / "ws", tmp_path / "home", tmp_path / "tools")
    mounts.tools.mkdir()
    sleeping = Invocation(["/bin/sleep", "30"], {"PATH": "/usr/bin:/bin"}, "/workspace")
    try:
        on_1 = await sandbox.start(sleeping, mounts)  # engine 1 now has more load
        engine_2("stop")
        moved = await sandbox.start(sleeping, mounts)
        one, two = sandbox.engines.engines
        assert not two.up and one.load == 2  # engine 2 left rotation; both turns on 1
        for proc in (on_1, moved):
            await proc.kill()
    finally:
        engine_2()
        await sandbox.close()
