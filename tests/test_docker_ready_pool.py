"""The docker sandbox's ready pool, run for real against a live engine
(sandbox/docker/ready_pool.py): a turn takes a container started ahead, sees only its own
folders, serves one response and is removed after it; the pool refills, closes clean, and a
killed server's slots are reaped. tests/test_docker_sandbox.py runs every hardening test on
a pooled container too. Skipped, loudly, only when no Docker engine answers."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness_bases.base import Invocation
from tests.support.docker import TEST_DOCKER_RUNTIME, engine_or_skip, runtime_image_or_skip
from tests.test_docker_sandbox import ENV, gateway_app, gone, inspect, run
from uhp_server.sandbox.base import SessionMounts
from uhp_server.sandbox.docker import DockerSandbox, reaper, slot_mounts
from uhp_server.sandbox.docker.process import DockerProcess

pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(TEST_DOCKER_RUNTIME == "runsc", reason="gVisor has no ready pool"),
]


@pytest.fixture(scope="module")
def image() -> str:
    return runtime_image_or_skip()


def session(tmp_path: Path, name: str, number: int | None = None) -> SessionMounts:
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    return SessionMounts(
        tmp_path / name / "ws",
        tmp_path / name / "home",
        tools,
        agent_number=number,
        labels={"uhp.session": f"hsess_{name}", "uhp.response": f"resp_{name}"},
    )


async def open_box(data: Path, image: str, size: int = 2) -> DockerSandbox:
    box = DockerSandbox(data, image=image, ready_pool=size)
    await box.open(gateway_app)
    return box


@pytest.fixture
async def box(tmp_path: Path, image: str) -> AsyncIterator[DockerSandbox]:
    sandbox = await open_box(tmp_path / "data", image)
    yield sandbox
    await sandbox.close()


async def filled(box: DockerSandbox, user: tuple[int, int], timeout: float = 60) -> set[str]:
    """Wait until `user` has every slot ready; returns their container ids."""
    assert box.pool is not None
    box.pool.want(user)
    async with asyncio.timeout(timeout):
        while len(box.pool.ready(user)) < box.pool.size:
            await asyncio.sleep(0.05)
    return {slot.container_id for slot in box.pool.ready(user)}


async def named(container_id: str, name: str, timeout: float = 10) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while (info := inspect(container_id)) is not None and info["Name"] != name:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return info is not None


async def start(box: DockerSandbox, mounts: SessionMounts, script: str) -> DockerProcess:
    proc = await box.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    assert isinstance(proc, DockerProcess)
    return proc


def exec_in(container_id: str, command: list[str]) -> str:
    api = engine_or_skip()
    made = api.exec_create(container_id, command)  # as the slot's agent uid
    return api.exec_start(made["Id"]).decode()


async def test_a_ready_slot_holds_no_principals_folder_token_or_environment(
    box: DockerSandbox, tmp_path: Path
) -> None:
    ready = await filled(box, box.user)
    slot = next(iter(ready))
    # Its folders are empty, its gateway folder holds its account and no socket yet, and it
    # has none of a turn's variables.
    assert exec_in(slot, ["ls", "-A", "/workspace", "/home/agent", "/opt/uhp-tools"]) == (
        "/home/agent:\n\n/opt/uhp-tools:\n\n/workspace:\n"
    )
    assert exec_in(slot, ["ls", "-A", "/run/uhp-gateway"]) == "file-group\nfile-passwd\n"
    assert "UHP_TEST_MARK" not in exec_in(slot, ["cat", "/proc/1/environ"])
    info = inspect(slot)
    assert info is not None and info["Config"]["Labels"]["uhp.slot"]
    assert info["Name"].startswith("/uhp-slot-")


async def test_a_pooled_turn_sees_only_its_own_workspace_and_home(
    box: DockerSandbox, tmp_path: Path
) -> None:
    ready = await filled(box, box.user)
    a, b = session(tmp_path, "a"), session(tmp_path, "b")
    write = "echo mine > /workspace/w.txt; echo mine > /home/agent/h.txt; echo up; cat"
    first, second = await start(box, a, write), await start(box, b, "echo up; cat")
    try:
        assert {first.container_id, second.container_id} == ready  # both from the pool
        assert await asyncio.wait_for(anext(first.lines()), 20) == b"up"
        assert await asyncio.wait_for(anext(second.lines()), 20) == b"up"
        assert (tmp_path / "a" / "ws" / "w.txt").read_text() == "mine\n"
        # Made before its turn, it carries no uhp.response label: it is named after it.
        assert await named(first.container_id, "/uhp-resp_a")
        assert (tmp_path / "a" / "home" / "h.txt").read_text() == "mine\n"
        # Another session's turn, beside it: an empty workspace and home, no trace of a's.
        script = "ls -A /workspace /home/agent; find / -name w.txt 2>/dev/null; echo end"
        _, out = await run(box, b, script)
        assert out == ["/home/agent:", "", "/workspace:", "end"]
    finally:
        await first.kill()
        await second.kill()


async def test_two_responses_never_share_a_slot_and_each_slot_is_removed_after(
    box: DockerSandbox, tmp_path: Path
) -> None:
    seen: list[str] = []
    pooled = 0
    for turn in range(4):
        ready = await filled(box, box.user)
        proc = await start(box, session(tmp_path, f"s{turn}"), "echo $$")
        pooled += proc.container_id in ready
        out = [line async for line in proc.lines()]
        assert await proc.wait() == 0 and out
        seen.append(proc.container_id)
        assert await gone(proc.container_id)
        # Its folders go with it: only the slots ready now have folders on the shared tmpfs.
        await filled(box, box.user)
        assert box.pool is not None and box._slot_mounts is not None
        names = {slot.name for slot in box.pool.ready(box.user)}
        assert set(os.listdir(box._slot_mounts.root)) == names
        assert set(os.listdir(box.gateway.folder)) == names | {"resolv.conf"}
    assert pooled == 4 and len(set(seen)) == 4


async def test_the_pool_refills_after_a_slot_is_taken(box: DockerSandbox, tmp_path: Path) -> None:
    ready = await filled(box, box.user)
    proc = await start(box, session(tmp_path, "a"), "cat")
    try:
        assert proc.container_id in ready
        refilled = await filled(box, box.user)
        assert len(refilled) == 2 and proc.container_id not in refilled
    finally:
        await proc.kill()


async def test_each_principals_turn_takes_a_slot_of_its_own_uid(
    box: DockerSandbox, tmp_path: Path
) -> None:
    for number in (0, 1):
        user = box.users.for_principal(number)
        ready = await filled(box, user)
        proc = await start(box, session(tmp_path, f"p{number}", number), "id -u")
        assert proc.container_id in ready
        out = [line.decode() async for line in proc.lines()]
        assert await proc.wait() == 0 and out == [str(user[0])]


async def test_cancelling_a_pooled_turn_kills_its_container(
    box: DockerSandbox, tmp_path: Path
) -> None:
    ready = await filled(box, box.user)
    proc = await start(box, session(tmp_path, "a"), "echo up; trap '' TERM; sleep 600")
    assert proc.container_id in ready
    assert await asyncio.wait_for(anext(proc.lines()), 20) == b"up"
    await proc.kill()
    assert await proc.wait() < 0
    assert await gone(proc.container_id)
    assert not (tmp_path / "a" / "ws" / ".overlay").exists() or not os.listdir(
        tmp_path / "a" / "ws" / ".overlay"
    )


async def test_a_start_cancelled_midway_leaves_nothing_behind(
    box: DockerSandbox, tmp_path: Path
) -> None:
    for delay in (0, 0.001, 0.005, 0.02):
        await filled(box, box.user)
        task = asyncio.create_task(start(box, session(tmp_path, "a"), "sleep 600"))
        await asyncio.sleep(delay)
        task.cancel()
        try:
            proc = await task
        except asyncio.CancelledError:
            continue
        await proc.kill()  # it had started before the cancel
    await filled(box, box.user)
    assert box.pool is not None
    ready = {slot.container_id for slot in box.pool.ready(box.user)}
    await asyncio.sleep(1)
    api = engine_or_skip()
    assert set(reaper.owned_containers(api, box.owner)) == ready


async def test_the_pool_off_runs_every_turn_in_a_container_of_its_own(
    tmp_path: Path, image: str
) -> None:
    off = await open_box(tmp_path / "off", image, size=0)
    try:
        assert off.pool is None
        proc = await start(off, session(tmp_path, "a"), "echo ok")
        assert [line async for line in proc.lines()] == [b"ok"]
        assert await proc.wait() == 0
        assert await gone(proc.container_id)
        assert reaper.owned_containers(engine_or_skip(), off.owner) == []  # no slot made
    finally:
        await off.close()


async def test_close_removes_the_slots_and_their_shared_folder(tmp_path: Path, image: str) -> None:
    sandbox = await open_box(tmp_path / "data", image)
    ready = await filled(sandbox, sandbox.user)
    assert sandbox._slot_mounts is not None
    root = sandbox._slot_mounts.root
    assert os.path.ismount(root)
    await sandbox.close()
    for container_id in ready:
        assert await gone(container_id)
    assert not os.path.ismount(root)


async def test_a_killed_servers_slots_are_reaped_at_the_next_start(
    tmp_path: Path, image: str
) -> None:
    data = tmp_path / "data"
    first = await open_box(data, image)
    left = await filled(first, first.user)
    # The server "dies": its gateway goes; its slots and their shared folder are left.
    assert first.pool is not None
    first.pool._closed = True
    await first.gateway.close()
    second = await open_box(data, image)
    try:
        assert second.owner == first.owner
        for container_id in left:
            assert await gone(container_id)
        assert second._slot_mounts is not None
        assert os.listdir(second._slot_mounts.root) == []  # a fresh tmpfs
        assert slot_mounts.ROOT in second._slot_mounts.root.parents
    finally:
        await second.close()
        for slot in [s for slots in first.pool._ready.values() for s in slots]:
            slot.sock.close()
