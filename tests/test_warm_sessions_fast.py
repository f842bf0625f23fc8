"""`uhpserver_keepWarmSeconds`, in process: how a harness sets it, and the key a warm
process is reused by (engine/turns/warm.py). The process itself: test_warm_sessions_e2e.py."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from harness_bases import registry
from harness_bases.base import Process, TurnSpec
from harness_bases.events import AgentEvent
from harness_bases.turns import AgentTurn
from storage import keys as key_store
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import FakeBase, FakeProcess, FakeTurn, Hang, answer
from tests.support.harness_api import AUTH, create, make_client, refused
from tests.support.in_process import InProcess, in_process
from tests.support.waiting import wait_for
from uhp_server.engine.turns.run import Run, TurnPlan
from uhp_server.engine.turns.warm import WarmAgents, WarmKey, harness_revision
from uhp_server.gateway.mcp_targets import McpTarget

FIELD = "uhpserver_keepWarmSeconds"


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    with make_client(tmp_path / "data") as client:
        yield client


@pytest.mark.parametrize("value", [-1, 3601, "60", True, 1.5, [60], {"s": 60}])
def test_a_keep_warm_time_that_is_not_0_to_3600_seconds_is_refused(
    http: TestClient, value: Any
) -> None:
    error = refused(
        http.post("/v1/harnesses", json={"base": "codex", FIELD: value}, headers=AUTH), FIELD
    )
    assert "3600" in error["message"]


def test_off_unless_set_and_kept_through_a_get_put_round_trip(http: TestClient) -> None:
    plain = create(http, {"base": "codex"})
    assert FIELD not in plain
    off = create(http, {"base": "codex", FIELD: 0})
    assert FIELD not in off  # 0 is off, shown as absent like null
    warm = create(http, {"base": "codex", FIELD: 3600})
    assert warm[FIELD] == 3600
    put = http.put(f"/v1/harnesses/{warm['id']}", json=warm, headers=AUTH)
    assert put.status_code == 200 and put.json()[FIELD] == 3600
    cleared = http.put(f"/v1/harnesses/{warm['id']}", json={**warm, FIELD: None}, headers=AUTH)
    assert cleared.status_code == 200 and FIELD not in cleared.json()


def test_a_put_refuses_a_bad_value_in_the_callers_format(http: TestClient) -> None:
    warm = create(http, {"base": "codex", FIELD: 60})
    response = http.put(f"/v1/harnesses/{warm['id']}", json={**warm, FIELD: 99999}, headers=AUTH)
    refused(response, FIELD)
    assert http.get(f"/v1/harnesses/{warm['id']}", headers=AUTH).json()[FIELD] == 60


def _run(**plan: Any) -> Run:
    base = registry()["codex"]
    fields: dict[str, Any] = dict(
        base=base,
        prompt="hi",
        model="gpt-test",
        system_prompt="",
        disabled_tools=(),
        max_step=None,
        timeout_seconds=60,
        max_output_tokens=None,
        native_session_id="thread-1",
        workspace=Path("/nowhere/ws"),
        home=Path("/nowhere/home"),
        keep_warm_seconds=60,
        harness_revision=harness_revision("chrn_1", {"systemPrompt": ""}),
    )
    fields.update(plan)
    principal = fields.pop("principal", "p_1")
    return Run("resp_1", principal, "sess_1", TurnPlan(**fields), None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"principal": "p_2"},
        {"model": "gpt-other"},
        {"harness_revision": harness_revision("chrn_1", {"systemPrompt": "terse"})},
        {"system_prompt": "Answer in French."},
        {"ask_user": True},
        {"max_step": 3},
        {"max_output_tokens": 100},
        {"mcp_servers": (McpTarget("docs", "https://mcp.example/docs"),)},
        {"memory": object()},
        {"base": registry()["claude-code"]},
    ],
)
def test_a_warm_process_is_reused_only_by_a_turn_asking_what_it_was_started_with(
    change: dict[str, Any],
) -> None:
    kept = WarmKey.of(_run())
    assert WarmKey.of(_run()) == kept  # the same turn again: reused
    assert WarmKey.of(_run(**change)) != kept


def test_the_prompt_and_budget_of_time_do_not_change_the_key() -> None:
    kept = WarmKey.of(_run())
    assert WarmKey.of(_run(prompt="something else", timeout_seconds=5)) == kept


def test_a_harness_revision_changes_with_any_change_to_its_stored_configuration() -> None:
    stored = {"systemPrompt": "", "skills": [], FIELD: 60}
    assert harness_revision("chrn_1", stored) == harness_revision("chrn_1", dict(stored))
    assert harness_revision("chrn_1", stored) != harness_revision("chrn_2", stored)
    assert harness_revision("chrn_1", stored) != harness_revision(
        "chrn_1", {**stored, "skills": [{"name": "x"}]}
    )


# -- the engine keeping a process, on a fake base whose process outlives its turns -----------


class KeptTurn(FakeTurn):
    """A FakeTurn whose process does not exit when its events end: a CLI holding turns."""

    async def run(self) -> AsyncGenerator[AgentEvent, None]:
        for step in self.steps:
            if isinstance(step, Hang):
                await self.interrupted.wait()
                return
            yield step  # type: ignore[misc]


@dataclass(eq=False)
class KeepingBase(FakeBase):
    keeps_warm = True

    def _turn(self, proc: Process, turn: TurnSpec) -> KeptTurn:
        self.specs.append(turn)
        agent_turn = KeptTurn(proc, turn, self.scripts.get(turn.prompt.strip(), answer("ok")))
        self.turns.append(agent_turn)
        return agent_turn

    def start_turn(self, proc: Process, turn: TurnSpec) -> KeptTurn:
        return self._turn(proc, turn)

    def continue_turn(self, previous: AgentTurn, turn: TurnSpec) -> KeptTurn:
        return self._turn(previous.proc, turn)  # type: ignore[attr-defined]


@pytest.fixture
async def engine(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, base=KeepingBase()
    ) as running:
        yield running


async def _harness(engine: InProcess, keep_warm: int | None) -> str:
    body: dict[str, Any] = {"base": "fake"}
    if keep_warm is not None:
        body[FIELD] = keep_warm
    made = await engine.client.post("/v1/harnesses", json=body)
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


async def _turn(engine: InProcess, harness_id: str, text: str, after: str | None = None) -> dict:
    body: dict[str, Any] = {"metadata": {"harness_id": harness_id}}
    if after is not None:
        body["previous_response_id"] = after
    answered = await engine.submit(text, **body)
    assert answered.status_code == 200, answered.text
    return answered.json()


def ended(proc: FakeProcess) -> bool:
    """Stopped as a warm process is: stdin closed (the CLI exits by itself), or killed."""
    return proc.killed or proc.stdin_closed


def warm_of(engine: InProcess) -> WarmAgents:
    warm = engine.ctx.runs.executor.warm
    assert warm is not None, "the server keeps processes warm when a harness asks"
    return warm


async def _kept(engine: InProcess, session_id: str) -> None:
    warm = warm_of(engine)
    await wait_for(lambda: session_id in warm.sessions(), timeout=5)


async def test_the_next_turn_goes_on_in_the_kept_process_with_its_token_live_again(
    engine: InProcess,
) -> None:
    harness_id = await _harness(engine, 600)
    first = await _turn(engine, harness_id, "one")
    session = first["metadata"]["session_id"]
    await _kept(engine, session)
    (proc,) = engine.sandbox.running
    token = engine.base.specs[0].gateway_token
    tokens = engine.ctx.runs.executor.tokens
    assert tokens.get(token, proc.mounts.door) is None  # refused while it idles
    assert proc.paused  # and it runs nothing while it idles: no turn slot holds it
    engine.base.script("two", [Hang()])
    second = await engine.submit(
        "two",
        metadata={"harness_id": harness_id},
        previous_response_id=first["id"],
        background=True,
    )
    rid = second.json()["id"]
    await wait_for(lambda: len(engine.base.specs) == 2, timeout=5)
    assert engine.sandbox.started == [proc]  # no new process: the kept one goes on
    assert engine.base.specs[1].gateway_token == token
    assert tokens.get(token, proc.mounts.door) is not None  # live for the turn
    assert not proc.paused
    cancelled = await engine.client.post(f"/v1/responses/{rid}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    await wait_for(lambda: proc.killed, timeout=10)  # a cancelled turn's process never stays
    assert session not in warm_of(engine).sessions()
    assert tokens.get(token, proc.mounts.door) is None


async def test_off_by_default_every_turn_starts_a_process_of_its_own(engine: InProcess) -> None:
    harness_id = await _harness(engine, None)
    first = await _turn(engine, harness_id, "one")
    await wait_for(lambda: not engine.sandbox.running, timeout=5)
    await _turn(engine, harness_id, "two", after=first["id"])
    assert len(engine.sandbox.started) == 2
    assert len(warm_of(engine)) == 0


async def test_a_sandbox_not_made_to_keep_processes_starts_every_turn_cold(
    engine: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docker sandbox has not been tested keeping a process across responses: there the
    setting changes nothing (Sandbox.keeps_processes_warm)."""
    monkeypatch.setattr(type(engine.sandbox), "keeps_processes_warm", False)
    harness_id = await _harness(engine, 600)
    first = await _turn(engine, harness_id, "one")
    await wait_for(lambda: not engine.sandbox.running, timeout=5)
    await _turn(engine, harness_id, "two", after=first["id"])
    assert len(engine.sandbox.started) == 2
    assert len(warm_of(engine)) == 0


async def test_a_process_the_sandbox_cannot_pause_is_not_kept(engine: InProcess) -> None:
    """An idle warm process must take no CPU outside admission (found in review: a loop
    the agent left behind ran on at 80% with no turn running): one its sandbox cannot pause
    is stopped at the turn's end, as a cold one, and its token revoked."""
    harness_id = await _harness(engine, 600)
    original_start = engine.sandbox.start

    async def unpausable(*args: Any, **kwargs: Any) -> Any:
        proc = await original_start(*args, **kwargs)
        assert isinstance(proc, FakeProcess)
        proc.can_pause = False
        return proc

    engine.sandbox.start = unpausable  # type: ignore[method-assign]
    first = await _turn(engine, harness_id, "one")
    await wait_for(lambda: not engine.sandbox.running, timeout=5)
    (proc,) = engine.sandbox.started
    assert proc.killed or proc.stdin_closed
    assert len(warm_of(engine)) == 0
    token = engine.base.specs[0].gateway_token
    assert engine.ctx.runs.executor.tokens.get(token, proc.mounts.door) is None
    assert first["status"] == "completed"


async def test_idle_timeout_cancel_delete_and_a_changed_harness_each_end_it(
    engine: InProcess,
) -> None:
    warm = warm_of(engine)
    short = await _harness(engine, 1)
    first = await _turn(engine, short, "one")
    await _kept(engine, first["metadata"]["session_id"])
    await wait_for(lambda: len(warm) == 0 and not engine.sandbox.running, timeout=10)

    harness_id = await _harness(engine, 600)
    ends = {
        "cancel": lambda s, r: engine.client.post(f"/v1/sessions/{s}/cancel"),
        "cancel the response": lambda s, r: engine.client.post(f"/v1/responses/{r}/cancel"),
        "delete": lambda s, r: engine.client.delete(f"/v1/sessions/{s}"),
        "harness change": lambda s, r: engine.client.put(
            f"/v1/harnesses/{harness_id}", json={"base": "fake", FIELD: 600, "name": "new"}
        ),
    }
    for why, end in ends.items():
        done = await _turn(engine, harness_id, "one")
        session = done["metadata"]["session_id"]
        await _kept(engine, session)
        proc = engine.sandbox.started[-1]
        answered = await end(session, done["id"])
        assert answered.status_code == 200, (why, answered.text)
        await wait_for(functools.partial(ended, proc), timeout=10)
        assert session not in warm.sessions(), why


async def test_another_session_never_gets_the_kept_process(engine: InProcess) -> None:
    harness_id = await _harness(engine, 600)
    first = await _turn(engine, harness_id, "one")
    await _kept(engine, first["metadata"]["session_id"])
    other = await _turn(engine, harness_id, "two")  # a new session
    assert other["metadata"]["session_id"] != first["metadata"]["session_id"]
    assert len(engine.sandbox.started) == 2
    warm = warm_of(engine)
    await wait_for(lambda: len(warm) == 2, timeout=5)  # each session its own


async def test_a_turn_bringing_files_or_not_kept_starts_cold(engine: InProcess) -> None:
    harness_id = await _harness(engine, 600)
    first = await _turn(engine, harness_id, "one")
    await _kept(engine, first["metadata"]["session_id"])
    (kept,) = engine.sandbox.running
    unkept = await engine.submit(
        "two", metadata={"harness_id": harness_id}, previous_response_id=first["id"], store=False
    )
    assert unkept.status_code == 200, unkept.text
    assert len(engine.sandbox.started) == 2  # a store: false turn never runs in a kept one
    await wait_for(lambda: ended(kept), timeout=10)
    assert len(warm_of(engine)) == 0  # and leaves none behind


async def test_the_server_stopping_ends_every_kept_process(tmp_path: Path, provider) -> None:
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, base=KeepingBase()
    ) as running:
        harness_id = await _harness(running, 600)
        first = await _turn(running, harness_id, "one")
        await _kept(running, first["metadata"]["session_id"])
        (proc,) = running.sandbox.running
    assert proc.killed


async def test_room_is_made_from_the_principal_holding_the_most_not_from_another(
    tmp_path: Path, provider: RunningProvider
) -> None:
    """At most UHP_MAX_CONCURRENT_TURNS processes idle: one principal's many sessions end
    their own oldest, never another principal's one."""
    async with in_process(
        tmp_path / "data",
        provider.base_url,
        PROVIDER_KEY,
        base=KeepingBase(),
        max_concurrent_turns=2,
    ) as engine:
        warm = warm_of(engine)
        _, key = await engine.ctx.db.write(key_store.create_key, "other-principal")
        theirs = {"Authorization": f"Bearer {key}"}
        made = await engine.client.post(
            "/v1/harnesses", json={"base": "fake", FIELD: 600}, headers=theirs
        )
        their_harness = made.json()["id"]
        answered = await engine.submit(
            "one", metadata={"harness_id": their_harness}, headers=theirs
        )
        their_session = answered.json()["metadata"]["session_id"]
        await _kept(engine, their_session)
        mine = await _harness(engine, 600)
        sessions = []
        for _ in range(3):
            done = await _turn(engine, mine, "one")
            sessions.append(done["metadata"]["session_id"])
            await wait_for(lambda: len(warm) == 2 and sessions[-1] in warm.sessions())
        assert their_session in warm.sessions()
        assert set(warm.sessions()) == {their_session, sessions[-1]}


async def test_an_end_asked_for_while_the_process_is_on_its_way_still_ends_it(
    engine: InProcess,
) -> None:
    """The response ends before its process is paused and parked: a cancel or deletion sent
    in between (found in CI: the process stayed warm after its response's cancel) reaches
    it as it arrives; and the session's next turn, which starts once the last one ended
    (the process parked), goes on in it."""
    harness_id = await _harness(engine, 600)
    original_start = engine.sandbox.start
    pausing = asyncio.Event()

    async def slow_to_pause(*args: Any, **kwargs: Any) -> Any:
        proc = await original_start(*args, **kwargs)
        pause = proc.pause

        async def held_pause() -> bool:
            await pausing.wait()
            return await pause()

        proc.pause = held_pause  # type: ignore[method-assign]
        return proc

    engine.sandbox.start = slow_to_pause  # type: ignore[method-assign]
    ends = {
        "cancel": lambda s, r: engine.client.post(f"/v1/sessions/{s}/cancel"),
        "cancel the response": lambda s, r: engine.client.post(f"/v1/responses/{r}/cancel"),
        "delete": lambda s, r: engine.client.delete(f"/v1/sessions/{s}"),
    }
    warm = warm_of(engine)
    for why, end in ends.items():
        pausing.clear()
        done = await _turn(engine, harness_id, "one")
        session = done["metadata"]["session_id"]
        proc = engine.sandbox.started[-1]
        assert not ended(proc) and session not in warm.sessions(), "still on its way"
        answered = await end(session, done["id"])
        assert answered.status_code == 200, (why, answered.text)
        pausing.set()
        await wait_for(functools.partial(ended, proc), timeout=10)
        assert session not in warm.sessions(), why

    pausing.clear()
    first = await _turn(engine, harness_id, "one")
    second = asyncio.ensure_future(_turn(engine, harness_id, "two", after=first["id"]))
    await asyncio.sleep(0.2)
    pausing.set()
    await second
    started = len(engine.sandbox.started)
    assert engine.base.turns[-1].proc is engine.sandbox.started[started - 1]
    assert engine.base.turns[-2].proc is engine.base.turns[-1].proc, "went on in it"


async def test_a_cancel_that_ends_the_response_itself_while_the_turn_winds_up_ends_the_process(
    engine: InProcess,
) -> None:
    """Found in review: a turn slow to record its end (its files being collected) after it
    decided to keep its process; a cancel meanwhile writes `cancelled` itself, and the turn,
    finding its response ended, must not park the process."""
    harness_id = await _harness(engine, 600)
    executor = engine.ctx.runs.executor
    collect = executor._artifacts
    collecting, release = asyncio.Event(), asyncio.Event()

    async def slow_collection(*args: Any) -> Any:
        collecting.set()
        await release.wait()
        return await collect(*args)

    executor._artifacts = slow_collection  # type: ignore[method-assign,assignment]
    started = await engine.submit("one", metadata={"harness_id": harness_id}, background=True)
    response_id = started.json()["id"]
    await asyncio.wait_for(collecting.wait(), 10)
    cancelled = await engine.client.post(f"/v1/responses/{response_id}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    release.set()
    (proc,) = engine.sandbox.started
    await wait_for(functools.partial(ended, proc), timeout=10)
    assert len(warm_of(engine)) == 0
    token = engine.base.specs[0].gateway_token
    assert executor.tokens.get(token, proc.mounts.door) is None
