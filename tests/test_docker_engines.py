"""The docker sandbox's engine pool on its own (no engine needed): placement, a lost engine,
rejoining with backoff. tests/test_docker_engines_e2e.py drives the same with two real
engines under a real server."""

from __future__ import annotations

import pytest
import requests.exceptions

from tests.support.waiting import wait_for
from uhp_server.sandbox.base import SandboxError
from uhp_server.sandbox.docker import engines
from uhp_server.sandbox.docker.engines import Engine, EnginePool, parse_hosts, unreachable


class Api:
    """An engine's client as far as the pool uses it: a ping that answers or not."""

    def __init__(self, answers: bool = True) -> None:
        self.answers = answers

    def ping(self) -> bool:
        if not self.answers:
            raise requests.exceptions.ConnectionError("connection refused")
        return True


class Turn:
    def __init__(self) -> None:
        self.lost: str | None = None

    def engine_lost(self, reason: str) -> None:
        self.lost = reason


class Engines:
    """What answers: join(engine) succeeds for urls in `up` and counts its calls."""

    def __init__(self, *up: str) -> None:
        self.up = set(up)
        self.joins: list[str] = []

    def join(self, engine: Engine) -> None:
        self.joins.append(engine.url)
        if engine.url not in self.up:
            raise requests.exceptions.ConnectionError(f"{engine.url} refused")
        engine.api = Api()


def test_hosts_setting_parses_and_defaults_to_the_environments_engine() -> None:
    assert parse_hosts("") == [""]
    assert parse_hosts(" unix:///a.sock, tcp://h:2375 ,") == ["unix:///a.sock", "tcp://h:2375"]
    assert Engine("").name  # the environment's engine has a name to report


def test_unreachable_tells_a_lost_engine_from_a_refused_request() -> None:
    import docker.errors

    assert unreachable(requests.exceptions.ConnectionError("refused"))
    assert unreachable(FileNotFoundError("no socket"))
    assert not unreachable(docker.errors.APIError("conflict"))
    assert not unreachable(ValueError("bad"))


async def test_turns_go_to_the_least_loaded_engine_under_its_cap() -> None:
    world = Engines("a", "b")
    pool = EnginePool(["a", "b"], max_turns=2, join=world.join)
    await pool.open()
    try:
        placed = [pool.place() for _ in range(4)]
        assert [e.url for e in placed] == ["a", "b", "a", "b"]
        with pytest.raises(SandboxError, match="maximum of 2 turns"):
            pool.place()
        turn = Turn()
        pool.started(placed[0], turn)
        pool.ended(placed[0], turn)
        assert pool.place().url == "a"  # a has room again
    finally:
        await pool.close()


async def test_a_lost_engine_ends_its_turns_leaves_rotation_and_rejoins_when_it_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engines, "LOOP_TICK_SECONDS", 0.01)
    monkeypatch.setattr(engines, "BACKOFF_FIRST_SECONDS", 0.05)
    monkeypatch.setattr(engines, "HEALTH_INTERVAL_SECONDS", 0.05)
    world = Engines("a", "b")
    pool = EnginePool(["a", "b"], max_turns=0, join=world.join)
    await pool.open()
    try:
        b = pool.engines[1]
        turn = Turn()
        pool.place()  # on a
        placed = pool.place()
        assert placed is b
        pool.started(b, turn)
        # b stops answering: the health probe notices, b's turn ends naming it.
        world.up.discard("b")
        b.api.answers = False
        await wait_for(lambda: not b.up)
        assert turn.lost is not None and "b stopped answering" in turn.lost
        assert b.load == 0
        assert {pool.place().url for _ in range(3)} == {"a"}
        # Probed again with growing pauses while it is down; joins again once it answers.
        await wait_for(lambda: world.joins.count("b") >= 3)
        assert b.failed_probes >= 2 and not b.up
        world.up.add("b")
        await wait_for(lambda: b.up)
        assert pool.place() is b
    finally:
        await pool.close()


async def test_no_engine_answering_fails_the_open_naming_every_engine() -> None:
    pool = EnginePool(["a", "b"], max_turns=0, join=Engines().join)
    with pytest.raises(SandboxError, match=r"a: .*refused.*b: .*refused"):
        await pool.open()


async def test_an_engine_down_at_start_joins_later() -> None:
    world = Engines("a")
    pool = EnginePool(["a", "b"], max_turns=0, join=world.join)
    await pool.open()
    try:
        assert [e.url for e in pool.up_engines()] == ["a"]
        with pytest.raises(SandboxError, match="no docker engine is up"):
            pool.lost(pool.engines[0], "gone")
            pool.place()
    finally:
        await pool.close()
