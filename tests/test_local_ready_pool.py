"""The local sandbox's ready pool (UHP_LOCAL_READY_POOL, sandbox/local/ready_pool.py), run
for real: a turn takes a cgroup made ahead, with its own limits, its bwrap and everything it
starts born inside it; each slot serves one turn and goes with it, never reused; a fork bomb
in a slot's turn still stops at the limit; closing the sandbox leaves no stub and no
cgroup."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from pathlib import Path

import pytest

from harness_bases.base import Invocation
from uhp_server.sandbox import cgroups
from uhp_server.sandbox.base import SessionMounts
from uhp_server.sandbox.limits import LocalLimits, parse_size
from uhp_server.sandbox.local import LocalSandbox
from uhp_server.sandbox.local.process import LocalProcess

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.skipif(
        os.geteuid() != 0 or cgroups.detect() is None, reason="the pool needs cgroups (root)"
    ),
]

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/agent"}
LIMITS = LocalLimits(memory_bytes=parse_size("256m"), pids=48)


def mounts_in(root: Path) -> SessionMounts:
    tools = root / "tools"
    tools.mkdir(parents=True)
    return SessionMounts(workspace=root / "ws", home=root / "home", tools=tools)


def ready_groups(prefix: str) -> set[str]:
    hierarchy = cgroups.detect()
    assert hierarchy is not None
    return {p.name for p in hierarchy.pids_parent.glob(f"{prefix}ready-*")}


async def until_ready(prefix: str, count: int) -> set[str]:
    async with asyncio.timeout(30):
        while len(groups := ready_groups(prefix)) < count:
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # its stub moved in (the slot counts once it is)
    return groups


async def run(sandbox: LocalSandbox, mounts: SessionMounts, script: str) -> tuple[int, list[str]]:
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    await proc.close_stdin()
    async with asyncio.timeout(60):
        out = [line.decode() async for line in proc.lines()]
        return await proc.wait(), out


async def test_a_turn_takes_a_ready_cgroup_once_with_its_limits(tmp_path: Path) -> None:
    sandbox = LocalSandbox(
        tmp_path / "run", limits=LIMITS, server_id=f"pool{secrets.token_hex(4)}", ready_pool=1
    )
    prefix = sandbox.cgroup_prefix
    await sandbox.open(None)
    try:
        (first,) = await until_ready(prefix, 1)
        code, _ = await run(sandbox, mounts_in(tmp_path / "a"), "true")
        assert code == 0
        await asyncio.sleep(0.2)
        assert first not in ready_groups(prefix)  # it went with its turn: never reused
        hierarchy = cgroups.detect()
        assert hierarchy is not None
        (second,) = await until_ready(prefix, 1)
        assert second != first
        proc = await sandbox.start(
            Invocation(["/bin/sleep", "30"], ENV, "/workspace"), mounts_in(tmp_path / "b")
        )
        try:
            group = hierarchy.pids_parent / second
            assert isinstance(proc, LocalProcess)
            assert str(proc.pid) in (group / "cgroup.procs").read_text().split()
            assert (group / "pids.max").read_text().strip() == "48"
            memory = hierarchy.memory_parent / second / "memory.limit_in_bytes"
            assert int(memory.read_text()) == parse_size("256m")
        finally:
            await proc.kill()
        assert not (hierarchy.pids_parent / second).exists()
    finally:
        await sandbox.close()
    assert ready_groups(prefix) == set()  # the waiting stub killed, its cgroup removed


async def test_a_fork_bomb_in_a_ready_slot_stops_at_its_limit(tmp_path: Path) -> None:
    sandbox = LocalSandbox(
        tmp_path / "run", limits=LIMITS, server_id=f"pool{secrets.token_hex(4)}", ready_pool=1
    )
    await sandbox.open(None)
    try:
        await until_ready(sandbox.cgroup_prefix, 1)
        proc = await sandbox.start(
            Invocation(["/bin/sh", "-c", "while :; do sleep 30 & done"], ENV, "/workspace"),
            mounts_in(tmp_path / "a"),
        )
        async with asyncio.timeout(60):
            await proc.wait()
        assert await proc.limit_exceeded() == LIMITS.pids_message()
    finally:
        await sandbox.close()
