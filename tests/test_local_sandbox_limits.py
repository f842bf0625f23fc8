"""The local sandbox's resource limits, hit for real: a memory hog, a fork bomb, a disk
filler and an oversized file each stop their sandbox with a clear reason, while a sandbox
started beside it runs to its end."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness_bases.base import Invocation
from uhp_server.sandbox import cgroups
from uhp_server.sandbox.base import ExtraMount, RunLimits, SessionMounts
from uhp_server.sandbox.limits import LimitWatch, LocalLimits, parse_size
from uhp_server.sandbox.local import LocalSandbox
from uhp_server.sandbox.ownership import hand_over
from uhp_server.settings import Settings

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.heavy,  # fills memory, disk and the process table for real
]

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/agent"}
# Cgroups need root; CI and this project's machines run the tests as root.
needs_cgroups = pytest.mark.skipif(os.geteuid() != 0, reason="cgroup limits need root")

SMALL = LocalLimits(
    memory_bytes=parse_size("128m"),
    pids=64,
    file_size_bytes=parse_size("64m"),
    disk_bytes=parse_size("32m"),
)


def mounts_in(root: Path) -> SessionMounts:
    tools = root / "tools"
    tools.mkdir(parents=True)
    return SessionMounts(workspace=root / "ws", home=root / "home", tools=tools)


async def run(sandbox: LocalSandbox, mounts: SessionMounts, script: str) -> tuple[int, str | None]:
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    await proc.close_stdin()
    async with asyncio.timeout(60):
        code = await proc.wait()
    return code, await proc.limit_exceeded()


async def hit_beside_a_neighbour(tmp_path: Path, script: str) -> str | None:
    """Run `script` under SMALL limits while a well-behaved sandbox runs beside it; the
    neighbour must finish normally. Returns the offender's limit reason."""
    sandbox = LocalSandbox(limits=SMALL)
    neighbour = asyncio.ensure_future(
        run(sandbox, mounts_in(tmp_path / "b"), "sleep 1; echo done > /workspace/ok")
    )
    code, reason = await run(sandbox, mounts_in(tmp_path / "a"), script)
    assert code != 0
    assert await neighbour == (0, None)
    assert (tmp_path / "b" / "ws" / "ok").read_text() == "done\n"
    return reason


def test_sizes_parse() -> None:
    assert parse_size("4g") == 4 << 30
    assert parse_size("512M") == 512 << 20
    assert parse_size("1048576") == 1 << 20
    assert parse_size("0") == 0
    with pytest.raises(ValueError):
        parse_size("lots")


@needs_cgroups
def test_cgroups_are_found_here() -> None:
    # The server runs as root here: a fallback would hide a broken detection.
    assert cgroups.detect() is not None


@needs_cgroups
async def test_a_memory_hog_is_stopped(tmp_path: Path) -> None:
    hog = "python3 -c \"b = b'x' * (1 << 30)\"; sleep 30"
    reason = await hit_beside_a_neighbour(tmp_path, hog)
    assert reason == "The turn exceeded the sandbox's memory limit (128 MiB)."


@needs_cgroups
async def test_a_fork_bomb_is_stopped(tmp_path: Path) -> None:
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 30"
    reason = await hit_beside_a_neighbour(tmp_path, bomb)
    assert reason == "The turn exceeded the sandbox's process limit (64 processes)."


async def test_a_disk_filler_is_stopped(tmp_path: Path) -> None:
    filler = "i=0; while true; do i=$((i+1)); head -c 4000000 /dev/zero > /workspace/f$i; done"
    reason = await hit_beside_a_neighbour(tmp_path, filler)
    assert reason is not None and "workspace disk limit (32 MiB" in reason
    written = sum(f.stat().st_size for f in (tmp_path / "a" / "ws").iterdir())
    assert written < 1 << 30  # stopped, not left to fill the disk


async def test_a_file_past_the_size_limit_is_cut_and_stops_the_turn(tmp_path: Path) -> None:
    sandbox = LocalSandbox(limits=LocalLimits(file_size_bytes=1 << 20, disk_bytes=0))
    code, reason = await run(
        sandbox, mounts_in(tmp_path), "head -c 5000000 /dev/zero > /workspace/big"
    )
    assert code != 0  # the write failed (SIGXFSZ)
    assert (tmp_path / "ws" / "big").stat().st_size == 1 << 20
    assert reason == "The turn exceeded the sandbox's file size limit (1 MiB)."


async def test_a_turn_within_its_limits_reports_none(tmp_path: Path) -> None:
    sandbox = LocalSandbox(limits=SMALL)
    assert await run(sandbox, mounts_in(tmp_path), "echo hi > /workspace/x; sleep 0.3") == (0, None)


@needs_cgroups
async def test_open_removes_empty_cgroups_a_killed_server_left(tmp_path: Path) -> None:
    hierarchy = cgroups.detect()
    assert hierarchy is not None
    sandbox = LocalSandbox(tmp_path / "run", server_id="killedserver")
    left = hierarchy.create(sandbox.cgroup_prefix + "local-resp_left_by_it", 1 << 30, 10)
    await sandbox.open(None)
    assert not left.memory_dir.exists() and not left.pids_dir.exists()
    await sandbox.close()


@needs_cgroups
async def test_a_starting_server_leaves_another_servers_cgroups_alone(tmp_path: Path) -> None:
    hierarchy = cgroups.detect()
    assert hierarchy is not None
    running = LocalSandbox.from_settings(Settings(data_dir=tmp_path / "one"))
    starting = LocalSandbox.from_settings(Settings(data_dir=tmp_path / "two"))
    # The just-made, still-empty cgroup of the running server's starting turn.
    turn = running._cgroup("local:resp_starting")
    assert turn is not None
    try:
        await starting.open(None)
        assert turn.memory_dir.exists() and turn.pids_dir.exists()
        turn.add(os.getpid())  # what the turn does next must still work
        (hierarchy.memory_parent / "cgroup.procs").write_text(str(os.getpid()))
        if hierarchy.pids_parent != hierarchy.memory_parent:
            (hierarchy.pids_parent / "cgroup.procs").write_text(str(os.getpid()))
    finally:
        turn.remove()
        await starting.close()


def test_a_servers_cgroup_prefix_is_its_own_and_stays_with_its_data_folder(
    tmp_path: Path,
) -> None:
    one = LocalSandbox.from_settings(Settings(data_dir=tmp_path / "one"))
    two = LocalSandbox.from_settings(Settings(data_dir=tmp_path / "two"))
    again = LocalSandbox.from_settings(Settings(data_dir=tmp_path / "one"))
    assert one.cgroup_prefix != two.cgroup_prefix
    assert again.cgroup_prefix == one.cgroup_prefix


@needs_cgroups
async def test_every_turn_joins_one_cpu_group_weighted_below_the_server(tmp_path: Path) -> None:
    # Fifty agents starting at once must compete with the server as one, not as fifty.
    hierarchy = cgroups.detect()
    assert hierarchy is not None and hierarchy.cpu_parent is not None
    sandbox = LocalSandbox(tmp_path / "run", limits=SMALL, server_id="cpupool")
    await sandbox.open(None)
    script = "grep ':cpu' /proc/self/cgroup > /workspace/cgroup"
    for name in ("a", "b"):
        assert await run(sandbox, mounts_in(tmp_path / name), script) == (0, None)
    pool = hierarchy.cpu_parent / (sandbox.cgroup_prefix + "cpu")
    for name in ("a", "b"):
        line = (tmp_path / name / "ws" / "cgroup").read_text()
        assert line.strip().endswith("/" + pool.name), line
    assert int((pool / "cpu.shares").read_text()) == cgroups.TURNS_CPU_SHARES
    assert int((hierarchy.cpu_parent / "cpu.shares").read_text()) > cgroups.TURNS_CPU_SHARES
    await sandbox.close()
    assert not pool.exists()  # a stopped server leaves no group behind


@needs_cgroups
def test_a_server_killed_for_good_leaves_no_cgroups_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its data folder never starts again: the next server to start sweeps its groups once
    # they are stale (here at once), the CPU group too. (The family is narrowed to the killed
    # server's groups: the sweep must not touch the servers of tests running beside this.)
    hierarchy = cgroups.detect()
    assert hierarchy is not None and hierarchy.cpu_parent is not None
    killed = LocalSandbox(tmp_path / "killed", server_id="killedforgood")
    turn = hierarchy.create(killed.cgroup_prefix + "local-resp_x", 1 << 30, 10)
    pool = hierarchy.cpu_pool(killed.cgroup_prefix + "cpu")
    assert pool is not None
    hierarchy.remove_empty("uhp-nextserver-", killed.cgroup_prefix)
    assert turn.pids_dir.exists() and pool.exists()  # not stale yet: maybe a starting turn's
    monkeypatch.setattr(cgroups, "STALE_SECONDS", 0.0)
    hierarchy.remove_empty("uhp-nextserver-", killed.cgroup_prefix)
    assert not turn.pids_dir.exists() and not turn.memory_dir.exists()
    assert not pool.exists()


@needs_cgroups
async def test_a_cpu_group_swept_while_its_server_idled_comes_back_with_the_next_turn(
    tmp_path: Path,
) -> None:
    sandbox = LocalSandbox(tmp_path / "run", limits=SMALL, server_id="sweptpool")
    await sandbox.open(None)
    try:
        hierarchy = cgroups.detect()
        assert hierarchy is not None and hierarchy.cpu_parent is not None
        pool = hierarchy.cpu_parent / (sandbox.cgroup_prefix + "cpu")
        pool.rmdir()  # another server found it empty and old
        script = "grep ':cpu' /proc/self/cgroup > /workspace/cgroup"
        assert await run(sandbox, mounts_in(tmp_path / "a"), script) == (0, None)
        assert (tmp_path / "a" / "ws" / "cgroup").read_text().strip().endswith(pool.name)
        assert int((pool / "cpu.shares").read_text()) == cgroups.TURNS_CPU_SHARES
    finally:
        await sandbox.close()


def test_a_turn_past_both_limits_is_told_of_its_processes() -> None:
    # A fork bomb stopped at the process limit can fill the memory limit with its processes
    # too (it did, on a loaded machine): the cause, its processes, is what the turn reports.
    class BothExceeded:
        def memory_exceeded(self) -> bool:
            return True

        def pids_exceeded(self) -> bool:
            return True

    watch = LimitWatch(SMALL, BothExceeded(), [])  # type: ignore[arg-type]  # a cgroup's stand-in
    assert watch.cgroup_reason() == "The turn exceeded the sandbox's process limit (64 processes)."


async def test_a_start_with_limits_of_its_own_counts_its_writable_folder(tmp_path: Path) -> None:
    # An environment's build: its own limits in place of a turn's, and the version's folder
    # it writes (a further writable mount) counted towards the disk like the workspace.
    sandbox = LocalSandbox(limits=LocalLimits(disk_bytes=parse_size("1g")))
    version = tmp_path / "version"
    version.mkdir()
    hand_over(*sandbox.user, version)
    mounts = replace(
        mounts_in(tmp_path),
        extra=(ExtraMount(version, "/env/demo", writable=True),),
        limits=RunLimits(disk_bytes=parse_size("16m"), subject="build"),
    )
    script = (
        "i=0; while [ $i -lt 64 ]; do head -c 1048576 /dev/zero > /env/demo/f$i; "
        "i=$((i+1)); sleep 0.05; done"
    )
    code, reason = await run(sandbox, mounts, script)
    assert code != 0
    assert reason is not None and reason.startswith(
        "The build exceeded the sandbox's workspace disk limit (16 MiB"
    )
    assert len(list(version.iterdir())) < 64  # stopped while it wrote there


@needs_cgroups
async def test_a_paused_sandbox_runs_nothing_until_resumed_and_still_dies_when_killed(
    tmp_path: Path,
) -> None:
    """A warm process idling between its session's turns is paused (engine/turns/warm.py):
    a loop it left behind, forked children included, takes no CPU until its next turn
    resumes it; a kill reaches it paused."""
    sandbox = LocalSandbox(tmp_path / "run", limits=SMALL, server_id="pause")
    await sandbox.open(None)
    mounts = mounts_in(tmp_path / "a")
    count = (
        "i=0; while :; do i=$((i+1)); echo $i > /workspace/n.tmp; "
        "mv /workspace/n.tmp /workspace/n; done"
    )
    script = f"( {count} ) & ( {count.replace('/n', '/m')} ) & wait"
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)

    def counted() -> tuple[str, str]:
        ws = tmp_path / "a" / "ws"
        return ((ws / "n").read_text(), (ws / "m").read_text())

    await asyncio.sleep(1.0)
    assert await proc.pause()
    await asyncio.sleep(0.3)
    paused = counted()
    await asyncio.sleep(1.0)
    assert counted() == paused  # neither loop moved while paused
    await proc.resume()
    await asyncio.sleep(1.0)
    moved = counted()
    assert moved[0] != paused[0] and moved[1] != paused[1]
    assert await proc.pause()
    async with asyncio.timeout(30):
        await proc.kill()  # taken while frozen
    await sandbox.close()


def test_a_pause_waits_for_no_process_already_on_its_way_out() -> None:
    """The kernel leaves an exiting task where it is, so a pause that waited to move one
    gave up on a busy machine (a loop's `mv` that was slow to finish dying): a process gone
    or dead counts as out of the way, a live one does not."""
    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        for _ in range(1000):  # a zombie once it has exited
            if cgroups._exiting(str(child)):
                break
            time.sleep(0.01)
        else:
            raise AssertionError("an exited child never counted as on its way out")
        assert not cgroups._exiting(str(os.getpid()))
    finally:
        os.waitpid(child, 0)
    assert cgroups._exiting(str(child))  # reaped: no such process


# A process whose main thread ended by itself while another thread runs on: its leader is a
# zombie (PF_EXITING), its pid still the one cgroup.procs lists.
LEADER_GONE = """
import ctypes, pathlib, sys, threading, time
def count():
    i = 0
    while True:
        i += 1
        pathlib.Path(sys.argv[1]).write_text(str(i))
        time.sleep(0.01)
threading.Thread(target=count).start()
ctypes.CDLL(None).prctl(15, b"x) Z \\xff", 0, 0, 0)  # PR_SET_NAME: ')', ' Z ', not UTF-8
time.sleep(0.2)
ctypes.CDLL(None).pthread_exit(None)
"""


def _leader_gone(counter: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", LEADER_GONE, str(counter)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (
            counter.exists()
            and Path(f"/proc/{proc.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z"
        ):
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the leader never ended alone")


def test_a_process_whose_leader_ended_alone_is_not_on_its_way_out(tmp_path: Path) -> None:
    proc = _leader_gone(tmp_path / "n")
    try:
        assert not cgroups._exiting(str(proc.pid))  # its other thread runs on
    finally:
        proc.kill()
        proc.wait()


@needs_cgroups
def test_a_pause_freezes_the_threads_of_a_process_whose_leader_ended(tmp_path: Path) -> None:
    hierarchy = cgroups.detect()
    if hierarchy is None or hierarchy.version != 1 or hierarchy.freezer_parent is None:
        pytest.skip("a cgroup v1 freezer")
    group = hierarchy.create(f"uhp-test-leader-{os.getpid()}", 0, 0)
    counter = tmp_path / "n"
    proc = _leader_gone(counter)
    try:
        group.add(proc.pid)
        assert group.freeze()
        time.sleep(0.2)
        paused = counter.read_text()
        time.sleep(0.5)
        assert counter.read_text() == paused  # the live thread was frozen too
    finally:
        group.thaw()
        proc.kill()
        proc.wait()
        group.remove()
