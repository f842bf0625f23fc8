"""The docker ready pool's logic without an engine (sandbox/docker/ready_pool.py), and the
script a slot's shell runs, run by the real /bin/sh (sandbox/docker/slot_launch.py)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness_bases.base import Invocation, SandboxPaths
from uhp_server.sandbox.base import RunLimits, SessionMounts
from uhp_server.sandbox.docker import ready_pool, slot_launch
from uhp_server.sandbox.docker.container import HostMounts, Limits, host_config_kwargs
from uhp_server.sandbox.docker.engines import Engine, EnginePool
from uhp_server.sandbox.docker.ready_pool import ReadyPool, Slot
from uhp_server.sandbox.docker.sandbox import DockerSandbox
from uhp_server.sandbox.egress import EgressPolicy
from uhp_server.settings import Settings

ALICE, BOB = (200001, 200001), (200002, 200002)

# -- the slot's script, run by the real shell ------------------------------------------------


def run_slot_shell(invocation: Invocation, then: bytes = b"") -> subprocess.CompletedProcess:
    """The slot's program (slot_launch.COMMAND) in an empty environment, sent the turn's
    script on stdin and then `then`, as the CLI's own input."""
    script = slot_launch.turn_script(invocation)
    assert script is not None
    return subprocess.run(
        list(slot_launch.COMMAND),
        input=slot_launch.go_message(script) + then,
        capture_output=True,
        env={},
        cwd="/",
        timeout=20,
        check=False,
    )


def test_the_script_runs_the_exact_argv_in_the_cwd(tmp_path: Path) -> None:
    tricky = ["it's", 'a "quote"', "$HOME `id` $(id)", "new\nline", "  spaces  ", "", "ü*?"]
    done = run_slot_shell(
        Invocation(
            [
                "/usr/bin/python3",
                "-c",
                "import os, sys; print(repr(sys.argv[1:])); print(os.getcwd())",
                *tricky,
            ],
            {},
            str(tmp_path),
        )
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == [repr(tricky), str(tmp_path)]


def test_the_environment_is_the_invocations_plus_pwd_only() -> None:
    env = {"PATH": "/usr/bin:/bin", "TOKEN": "a'b\"c $x\nnext", "EMPTY": ""}
    done = run_slot_shell(Invocation(["/usr/bin/env", "-0"], env, "/tmp"))
    assert done.returncode == 0, done.stderr
    seen = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if item)
    # PWD as a container created for the turn has it (its launcher's shell); no OLDPWD.
    assert seen == {**env, "PWD": "/tmp"}


def test_what_follows_the_script_on_stdin_is_the_clis_to_the_byte() -> None:
    rest = b'first line\n{"jsonrpc": "2.0"}\nno newline at the end'
    done = run_slot_shell(Invocation(["/bin/cat"], {}, "/"), then=rest)
    assert (done.returncode, done.stdout) == (0, rest)


def test_a_closed_stdin_before_the_script_ends_the_shell() -> None:
    done = subprocess.run(list(slot_launch.COMMAND), input=b"", capture_output=True, timeout=20)
    assert done.returncode != 0


def test_a_missing_cwd_or_program_fails_as_a_created_container_would() -> None:
    assert run_slot_shell(Invocation(["/bin/true"], {}, "/no/such/dir")).returncode == 126
    assert run_slot_shell(Invocation(["/no/such/program"], {}, "/")).returncode == 127


def test_an_invocation_the_script_cannot_say_goes_the_cold_way() -> None:
    assert slot_launch.turn_script(Invocation(["x"], {"BAD-NAME": "1"}, "/")) is None
    assert slot_launch.turn_script(Invocation(["x"], {"A": "nul\0"}, "/")) is None
    assert slot_launch.turn_script(Invocation([], {}, "/")) is None
    assert slot_launch.turn_script(Invocation(["x"], {"A": "lone \udc80"}, "/")) is None
    assert slot_launch.turn_script(Invocation(["x \ud800"], {}, "/")) is None
    assert (
        slot_launch.turn_script(Invocation(["x" * slot_launch.MAX_SCRIPT_BYTES], {}, "/")) is None
    )


# -- the container: its folders follow mounts made after start -------------------------------


def test_a_slots_folders_are_bound_rslave_and_a_turns_are_not() -> None:
    paths = SandboxPaths()
    mounts = HostMounts("/p/ws", "/p/home", "/p/tools", "/h/gw", "/h/gw/resolv.conf")
    cold = host_config_kwargs(mounts, paths, Limits())["binds"]
    assert {b["mode"] for b in cold.values()} == {"rw", "ro"}
    slot = host_config_kwargs(
        HostMounts(**{**mounts.__dict__, "follow_mounts": True}), paths, Limits()
    )["binds"]
    assert slot["/p/ws"]["mode"] == "rw,rslave"
    assert slot["/p/home"]["mode"] == "rw,rslave"
    assert slot["/p/tools"]["mode"] == "ro,rslave"
    # The gateway folder and the files in it are not: the server writes into the folder.
    assert slot["/h/gw"]["mode"] == "ro"


def test_the_setting_defaults_to_two_and_zero_is_off(tmp_path: Path) -> None:
    assert Settings().docker_ready_pool == 2
    box = DockerSandbox.from_settings(Settings(data_dir=tmp_path, docker_ready_pool=0))
    assert box.ready_pool_size == 0


def test_what_a_slot_fixed_at_create_sends_a_turn_the_cold_way(tmp_path: Path) -> None:
    box = DockerSandbox(tmp_path, ready_pool=1)
    box.pool = object()  # type: ignore[assignment]  # as open() sets it, when it can
    invocation = Invocation(["/bin/true"], {"A": "1"}, "/workspace")
    mounts = SessionMounts(tmp_path / "w", tmp_path / "h", tmp_path / "t")
    overlays = object()
    assert box._pooled_go(invocation, mounts, overlays) is not None  # type: ignore[arg-type]
    assert box._pooled_go(invocation, mounts, None) is None  # no overlays to mount in
    own_memory = SessionMounts(**{**mounts.__dict__, "limits": RunLimits(memory_bytes=2**30)})
    assert box._pooled_go(invocation, own_memory, overlays) is None  # type: ignore[arg-type]
    bad_name = Invocation(["/bin/true"], {"A-B": "1"}, "/workspace")
    assert box._pooled_go(bad_name, mounts, overlays) is None  # type: ignore[arg-type]


# -- the pool's logic, with slots made up --------------------------------------------------


@dataclass
class Maker:
    """Makes and discards slots without an engine; counts both."""

    made: list[Slot] = field(default_factory=list)
    discarded: list[Slot] = field(default_factory=list)
    failures: int = 0  # the next makes that fail
    gate: asyncio.Event | None = None  # when set, a make waits for it

    async def make(self, engine: Engine, user: tuple[int, int]) -> Slot:
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise RuntimeError("engine refused")
        a, _ = socket.socketpair()
        slot = Slot(
            f"s{len(self.made)}",
            engine,
            user,
            f"c{len(self.made)}",
            a,
            asyncio.get_running_loop().create_future(),
        )
        self.made.append(slot)
        return slot

    async def discard(self, slot: Slot) -> None:
        slot.sock.close()
        self.discarded.append(slot)


def only_engine(pool: ReadyPool) -> Engine:
    return pool.engines.engines[0]


def up_engines(*urls: str, max_turns: int = 0) -> EnginePool:
    pool = EnginePool(list(urls), max_turns, lambda engine: None)
    for engine in pool.engines:
        engine.up = True
    return pool


async def settled(pool: ReadyPool) -> None:
    for _ in range(100):
        await asyncio.sleep(0)
    while pool._filling:
        await asyncio.sleep(0.01)


@pytest.fixture
async def maker() -> AsyncIterator[Maker]:
    made = Maker()
    yield made
    for slot in made.made:
        slot.sock.close()


async def test_a_wanted_uid_is_filled_to_size_on_every_engine(maker: Maker) -> None:
    engines = up_engines("unix:///a", "unix:///b")
    pool = ReadyPool(2, engines, maker.make, maker.discard)
    pool.want(ALICE)
    await settled(pool)
    assert len(pool.ready(ALICE)) == 4
    assert {s.engine.url for s in pool.ready(ALICE)} == {"unix:///a", "unix:///b"}
    assert pool.ready(BOB) == []
    await pool.close()


async def test_a_taken_slot_is_never_given_again_and_the_pool_refills(maker: Maker) -> None:
    engines = up_engines("")
    pool = ReadyPool(2, engines, maker.make, maker.discard)
    pool.want(ALICE)
    await settled(pool)
    taken = [pool.take(only_engine(pool), ALICE), pool.take(only_engine(pool), ALICE)]
    assert taken[0] is not None and taken[1] is not None and taken[0] is not taken[1]
    await settled(pool)
    ready = pool.ready(ALICE)
    assert len(ready) == 2 and not set(ready) & set(taken)
    assert len(maker.made) == 4
    await pool.close()


async def test_a_uid_never_gets_anothers_slot(maker: Maker) -> None:
    pool = ReadyPool(1, up_engines(""), maker.make, maker.discard)
    pool.want(ALICE)
    await settled(pool)
    assert (
        pool.take(only_engine(pool), BOB) is None
    )  # Bob's first turn is a cold one, then Bob has slots
    await settled(pool)
    bobs = pool.take(only_engine(pool), BOB)
    assert bobs is not None and bobs.user == BOB
    alices = pool.take(only_engine(pool), ALICE)
    assert alices is not None and alices.user == ALICE
    await pool.close()


async def test_a_slot_whose_container_exited_is_dropped_not_taken(maker: Maker) -> None:
    pool = ReadyPool(1, up_engines(""), maker.make, maker.discard)
    pool.want(ALICE)
    await settled(pool)
    (dead,) = pool.ready(ALICE)
    dead.exited.set_result(137)
    await settled(pool)
    assert dead in maker.discarded and dead not in pool.ready(ALICE)
    taken = pool.take(only_engine(pool), ALICE)
    assert taken is None or taken is not dead
    await pool.close()


async def test_a_slot_on_a_lost_engine_is_not_taken(maker: Maker) -> None:
    engines = up_engines("")
    pool = ReadyPool(1, engines, maker.make, maker.discard)
    pool.want(ALICE)
    await settled(pool)
    engines.engines[0].up = False
    assert pool.take(only_engine(pool), ALICE) is None
    await pool.close()


async def test_a_slot_is_taken_only_on_the_engine_the_turn_was_placed_on(
    maker: Maker,
) -> None:
    engines = up_engines("unix:///a", "unix:///b")
    pool = ReadyPool(1, engines, maker.make, maker.discard)
    pool.want(ALICE)
    await settled(pool)
    a, b = engines.engines
    on_b = pool.take(b, ALICE)
    assert on_b is not None and on_b.engine is b
    assert pool.take(b, ALICE) is None  # b's only slot is gone; a's stays a's
    assert [slot.engine for slot in pool.ready(ALICE)] == [a]
    await pool.close()


async def test_a_uid_in_use_keeps_its_place_and_an_idle_ones_is_given_up(
    maker: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = ReadyPool(1, up_engines(""), maker.make, maker.discard, max_users=1)
    pool.want(ALICE)
    await settled(pool)
    (alices,) = pool.ready(ALICE)
    # Alice was active just now: Bob's turns go cold, and make and remove nothing.
    assert pool.take(only_engine(pool), BOB) is None
    await settled(pool)
    assert pool.ready(ALICE) == [alices] and pool.ready(BOB) == []
    assert len(maker.made) == 1 and maker.discarded == []
    # Alice idle past the limit: Bob's next turn takes her place, her slot is removed.
    monkeypatch.setattr(ready_pool, "USER_IDLE_SECONDS", 0.0)
    assert pool.take(only_engine(pool), BOB) is None
    await settled(pool)
    assert pool.ready(ALICE) == [] and alices in maker.discarded
    assert len(pool.ready(BOB)) == 1
    await pool.close()


async def test_a_failing_engine_is_retried_a_few_times_then_left_to_the_next_turn(
    maker: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ready_pool, "RETRY_FIRST_SECONDS", 0.001)
    maker.failures = 10
    pool = ReadyPool(1, up_engines(""), maker.make, maker.discard)
    pool.want(ALICE)
    await settled(pool)
    assert maker.failures == 10 - ready_pool.FAILURES_BEFORE_PAUSE and not pool.ready(ALICE)
    maker.failures = 0
    assert pool.take(only_engine(pool), ALICE) is None  # the turn goes cold; its take fills again
    await settled(pool)
    assert len(pool.ready(ALICE)) == 1
    await pool.close()


async def test_close_removes_every_unused_slot_and_stops_filling(maker: Maker) -> None:
    pool = ReadyPool(2, up_engines(""), maker.make, maker.discard)
    pool.want(ALICE)
    await settled(pool)
    maker.gate = asyncio.Event()  # a fill under way when the pool closes
    assert pool.take(only_engine(pool), ALICE) is not None
    await asyncio.sleep(0.01)
    await pool.close()
    maker.gate.set()
    await asyncio.sleep(0.01)
    assert len(maker.made) == 2 and len(maker.discarded) == 1  # the one not taken
    pool.want(ALICE)
    assert not pool._filling  # closed: no more filling


async def test_size_zero_makes_nothing(maker: Maker) -> None:
    pool = ReadyPool(0, up_engines(""), maker.make, maker.discard)
    assert pool.take(only_engine(pool), ALICE) is None
    await settled(pool)
    assert maker.made == []


@pytest.mark.parametrize(
    ("runtime", "egress", "neutral", "why"),
    [
        ("runsc", False, True, "gVisor"),
        ("", True, True, "egress"),
        ("", False, False, "no neutral mounts"),
    ],
)
def test_the_pool_is_off_where_a_slot_could_not_take_its_turn(
    tmp_path: Path,
    runtime: str,
    egress: bool,
    neutral: bool,
    why: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = EgressPolicy(frozenset({"example.org"})) if egress else EgressPolicy()
    box = DockerSandbox(tmp_path, ready_pool=2, runtime=runtime, egress=policy)
    box._neutral = object() if neutral else None  # type: ignore[assignment]
    with caplog.at_level("WARNING"):
        box._open_pool()
    assert box.pool is None and box._slot_mounts is None
    (record,) = [r for r in caplog.records if r.message == "docker_ready_pool_off"]
    assert why in record.__dict__["reason"]
