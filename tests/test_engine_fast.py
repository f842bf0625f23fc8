"""The engine in-process, on the FakeBase and FakeSandbox: task service, turn executor, runs,
recovery, cancellation, budgets, idempotency, store=false and session busy, in seconds."""

from __future__ import annotations

import asyncio
import re
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from harness_bases.events import (
    NativeSession,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFailed,
    TurnFinished,
)
from storage.tables import SessionRow
from storage.unit import Tx
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import FakeBase, Hang, answer
from tests.support.in_process import InProcess, in_process
from tests.support.snapshot import snapshot
from tests.support.waiting import wait_for
from uhp_server.settings import Settings

MODEL = "gpt-test"


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider):
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as running:
        yield running


async def _status(server: InProcess, response_id: str) -> dict:
    resp = await server.client.get(f"/v1/responses/{response_id}")
    assert resp.status_code == 200, resp.text
    return resp.json()


def _text(response: dict) -> str:
    return "".join(
        part.get("text", "")
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


async def test_a_turn_completes_with_the_scripted_answer_and_the_spec_it_was_given(server):
    server.base.script("hello", answer("hi there"))
    resp = await server.submit("hello", instructions="Be brief.", model=MODEL)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "completed"
    assert _text(body) == "hi there"
    (spec,) = server.base.specs
    assert spec.prompt == "hello" and spec.model == MODEL
    assert "Be brief." in spec.system_prompt
    assert spec.gateway_token  # a per-turn token was issued
    (proc,) = server.sandbox.started
    assert proc.mounts.workspace.name == "workspace"


async def test_a_reported_failure_ends_failed_with_its_code(server):
    server.base.script("break", [TurnFailed("upstream said no", "provider_error")])
    body = (await server.submit("break")).json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == "provider_error"
    assert body["error"]["message"] == "upstream said no"


async def test_max_step_stops_the_turn_incomplete(server):
    steps = [
        ToolCallStarted("c1", "shell", "{}"),
        ToolCallFinished("c1", "ok"),
        ToolCallStarted("c2", "shell", "{}"),
        ToolCallFinished("c2", "ok"),
        TurnFinished(),
    ]
    server.base.script("two tools", steps)
    body = (await server.submit("two tools", max_step=1)).json()
    assert body["status"] == "incomplete"
    assert body["incomplete_details"]["reason"] == "max_step"
    # Cut short: the CLI is asked to stop cleanly (as the process winds down).
    await wait_for(lambda: server.base.turns[0].interrupted.is_set())
    calls = [item for item in body["output"] if item["type"] == "function_call"]
    assert len(calls) == 1


async def test_timeout_seconds_ends_a_hung_turn_incomplete_and_kills_it(server):
    server.base.script("hang", [TextDelta("m", "thinking"), Hang()])
    started = time.monotonic()
    body = (await server.submit("hang", timeout_seconds=1)).json()
    assert time.monotonic() - started < 5
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "timeout_seconds", "timeout_seconds": 1}
    await wait_for(lambda: not server.sandbox.running)


async def test_cancel_answers_in_time_is_idempotent_and_ends_cancelled(server):
    server.base.script("hang", [Hang()])
    response_id = (await server.submit("hang", background=True)).json()["id"]
    await wait_for(lambda: server.base.turns)
    started = time.monotonic()
    first = await server.client.post(f"/v1/responses/{response_id}/cancel")
    assert time.monotonic() - started < 1.0
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "cancelled"
    again = await server.client.post(f"/v1/responses/{response_id}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    assert (await _status(server, response_id))["status"] == "cancelled"
    assert server.base.turns[0].interrupted.is_set()
    await wait_for(lambda: not server.sandbox.running)


async def test_a_busy_session_refuses_a_second_turn_then_takes_the_next(server):
    server.base.script("first", [NativeSession("native-1"), Hang()])
    first_id = (await server.submit("first", background=True)).json()["id"]
    await wait_for(lambda: server.base.turns)
    busy = await server.submit("second", previous_response_id=first_id)
    assert busy.status_code == 409
    assert busy.json()["error"]["code"] == "session_busy"
    await server.client.post(f"/v1/responses/{first_id}/cancel")
    resumed = await server.submit("second", previous_response_id=first_id)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] == "completed"
    assert server.base.specs[-1].native_session_id == "native-1"  # resumed the CLI's session


async def test_an_idempotent_repeat_that_only_changes_delivery_is_the_same_task(server):
    key = {"Idempotency-Key": "task-1"}
    first = await server.submit("once", background=True, headers=key)
    assert first.status_code == 200, first.text
    # background and stream decide how the answer is delivered, not what runs.
    repeat = await server.submit("once", headers=key)
    assert repeat.status_code == 200, repeat.text
    assert repeat.json()["id"] == first.json()["id"]
    assert len(server.base.specs) == 1
    other = await server.submit("something else", headers=key)
    assert other.status_code == 409
    assert other.json()["error"]["code"].endswith("idempotency_key_reused")


async def test_store_false_leaves_no_title_and_store_true_does(server):
    stored = (await server.submit("a remembered prompt")).json()
    secret = (await server.submit("a secret prompt", store=False)).json()
    assert secret["status"] == "completed"
    titles = {}
    for body in (stored, secret):
        session_id = body["metadata"]["session_id"]
        session = await server.client.get(f"/v1/sessions/{session_id}")
        assert session.status_code == 200, session.text
        titles[body["id"]] = session.json().get("title") or ""
    assert titles[stored["id"]] == "a remembered prompt"
    assert "secret" not in titles[secret["id"]]


async def test_a_run_left_in_progress_ends_failed_on_start_up(tmp_path, provider):
    """A crash leaves the database as it was mid-turn; the next start finishes the turn
    `failed`, keeps its partial output and frees its session."""
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    # The same server started again (its data folder copied, so its id is set alike).
    same = {"replica_id": "restarted-server", "replica_lease_seconds": 1.0}
    async with in_process(tmp_path / "live", provider.base_url, PROVIDER_KEY, **same) as live:
        live.base.script("long", [TextDelta("m", "partial answer"), Hang()])
        response_id = (await live.submit("long", background=True)).json()["id"]
        await wait_for(lambda: live.base.turns)
        run = live.ctx.runs.get(response_id)
        await wait_for(lambda: any(e["type"].endswith("delta") for e in run.log.events))
        # The database file as a crash would leave it, while the turn is still running.
        snapshot(live.ctx.db, Settings(data_dir=crashed).database)
    async with in_process(crashed, provider.base_url, PROVIDER_KEY, **same) as restarted:
        body = await _status(restarted, response_id)
        assert body["status"] == "failed"
        assert "restarted" in body["error"]["message"]
        assert _text(body) == "partial answer"
        follow_up = await restarted.submit("next", previous_response_id=response_id)
        assert follow_up.status_code == 200, follow_up.text  # the session is free again


async def test_a_turn_the_base_never_ends_fails_instead_of_hanging(server):
    server.base.script("mute", [TextDelta("m", "half")])  # stdout ends without an outcome
    body = (await server.submit("mute")).json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == "harness_error"


def test_fake_base_declares_what_every_base_declares() -> None:
    from harness_bases.base import missing_declarations

    assert missing_declarations(FakeBase()) == []


async def test_the_session_is_released_in_the_terminal_events_own_transaction(server, monkeypatch):
    # Nothing after the commit of the terminal event is needed to free the session: a crash
    # right after it (here: the old separate release failing) leaves no busy session and
    # keeps the CLI's conversation id for the next turn's resume.
    from storage import sessions as session_store

    def crashed(*args, **kwargs):
        raise RuntimeError("the process died here")

    monkeypatch.setattr(session_store, "release_session", crashed)
    server.base.script("hello", [NativeSession("native-7"), *answer("hi")])
    body = (await server.submit("hello")).json()
    assert body["status"] == "completed"
    row = server.ctx.db.run(lambda tx: tx.orm.get(SessionRow, body["metadata"]["session_id"]))
    assert row is not None
    assert row.active_response_id is None and row.status == "completed"
    assert row.native_session_id == "native-7"


async def test_a_nul_character_in_client_text_is_never_a_server_error(server):
    # PostgreSQL's text columns refuse NUL: the session title drops it, a name refuses it.
    server.base.script("a\x00b", answer("ok"))
    body = (await server.submit("a\x00b")).json()
    assert body["status"] == "completed"
    session = await server.client.get(f"/v1/sessions/{body['metadata']['session_id']}")
    assert session.status_code == 200 and session.json()["title"] == "ab"
    named = await server.client.post("/v1/harnesses", json={"name": "h\x00x", "base": "fake"})
    assert named.status_code == 400, named.text
    assert named.json()["error"]["param"] == "name"


async def test_an_id_with_a_nul_character_finds_nothing_rather_than_failing(server):
    # PostgreSQL refuses NUL in any statement: a lookup by such an id is simply not found.
    for path in (
        "/v1/responses/%00",
        "/v1/sessions/%00/turns",
        "/v1/harnesses/%00",
        "/v1/harnesses/%00/models",
        "/s/%00",
    ):
        assert (await server.client.get(path)).status_code == 404, path
    assert (await server.client.post("/v1/sessions/%00/cancel")).status_code == 404
    continued = await server.submit("x", previous_response_id="resp_\x00")
    assert continued.status_code == 404, continued.text
    elsewhere = await server.submit("x", metadata={"harness_id": "harness_\x00"})
    assert elsewhere.status_code == 404, elsewhere.text
    listed = await server.client.get("/v1/sessions", params={"harness": "\x00"})
    assert listed.status_code == 200 and listed.json()["sessions"] == []
    # Kept, not refused: a door's own ids and a connection's model name may hold one.
    server.base.script("door", answer("ok"))
    harness_id = (await server.client.get("/v1/harnesses")).json()["harnesses"][0]["id"]
    connection = {"base_url": "https://example.com/v1", "model": "m\x00", "api_key": "k"}
    submitted = await server.client.post(
        f"/oumi/harnesses/{harness_id}/submit",
        json={
            "protocol_version": "1",
            "session_id": "row\x00",
            "invocation_id": "inv\x00",
            "session_action": "start",
            "input_messages": [{"role": "user", "content": "door"}],
            "model_connection": connection,
        },
    )
    assert submitted.status_code in (200, 202), submitted.text


def _storage_on_the_loop(server: InProcess, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Where the server runs a unit of work on the event loop from now on (stacks)."""
    on_loop: list[str] = []
    opened = server.ctx.db._unit

    def unit(*args: Any, **options: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return opened(*args, **options)
        on_loop.append("".join(traceback.format_stack(limit=6)))
        return opened(*args, **options)

    monkeypatch.setattr(server.ctx.db, "_unit", unit)
    return on_loop


async def test_no_storage_call_runs_on_the_event_loop_for_a_task_kept_or_not(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A turn's end (an unkept one's status and session release included) is written on the
    # writer thread: a call on the loop would stall every stream for its duration.
    on_loop = _storage_on_the_loop(server, monkeypatch)
    server.base.script("short", answer("done"))
    unkept = await server.submit("short", store=False)
    assert unkept.json()["status"] == "completed"
    follow = await server.submit("short", previous_response_id=unkept.json()["id"])
    assert follow.status_code == 200, follow.text  # its session was released first
    assert (await server.client.get(f"/v1/responses/{follow.json()['id']}")).status_code == 200
    assert on_loop == []


async def test_deleting_a_trace_does_no_storage_on_the_event_loop(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DELETE /v1/traces/{id} is an async route: marking the session deleted and revoking its
    # share are writes, which on the loop stall every stream (and on SQLite wait out the
    # writer's transaction, up to busy_timeout).
    server.base.script("short", answer("done"))
    done = await server.submit("short")
    session_id = done.json()["metadata"]["session_id"]
    on_loop = _storage_on_the_loop(server, monkeypatch)
    deleted = await server.client.delete(f"/v1/traces/{session_id}")
    assert deleted.status_code == 200, deleted.text
    assert on_loop == [], on_loop[0]


async def test_an_unkept_turn_whose_end_was_not_written_frees_its_session_once_the_db_is_back(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database is away when an unkept turn ends: the writer gives its end up (after
    # RECONNECT_SECONDS) and RunRegistry queues the session's release right behind it, which
    # then meets the database still away. That release must be tried again: otherwise the
    # session stays busy (its response in_progress, so nothing else frees it) until restart.
    import sqlite3

    from storage import event_batches, session_listing

    ends, record_status = event_batches.batch_ends, session_listing.record_status
    away = {"end": True, "release": True}

    def end_not_written(batch: event_batches.EventBatch) -> list[event_batches.RowUpdate]:
        if batch.status is not None and away.pop("end", False):
            raise sqlite3.OperationalError("the database is away")
        return ends(batch)

    def release_not_written(tx: Tx, response_id: str, status: str) -> None:
        if away.pop("release", False):
            raise sqlite3.OperationalError("the database is still away")
        record_status(tx, response_id, status)

    monkeypatch.setattr(event_batches, "batch_ends", end_not_written)
    monkeypatch.setattr(session_listing, "record_status", release_not_written)
    server.base.script("short", answer("done"))
    unkept = await server.submit("short", store=False)
    assert unkept.json()["status"] == "completed"
    await wait_for(lambda: away == {})  # the end and the release each met the database away
    deadline = time.monotonic() + 5
    while True:
        follow = await server.submit("short", previous_response_id=unkept.json()["id"])
        if follow.status_code == 200 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert follow.status_code == 200, follow.text


async def test_a_finished_run_is_forgotten_after_the_linger_and_a_later_one_is_not(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uhp_server.engine.turns import registry as runs_module

    runs = server.ctx.runs
    server.base.script("short", answer("done"))

    async def run_to_its_end() -> tuple[str, float]:
        response_id = (await server.submit("short")).json()["id"]
        run = runs.get(response_id)
        assert run is not None and run.task is not None
        await run.task
        return response_id, time.monotonic()  # at or after its end

    first, first_ended = await run_to_its_end()
    await asyncio.sleep(0.3)
    second, _ = await run_to_its_end()
    # The next start comes just over the linger after `first` ended, `second` 0.3 s later.
    linger = time.monotonic() - first_ended - 0.1
    monkeypatch.setattr(runs_module, "LINGER_SECONDS", linger)
    third = (await server.submit("short")).json()["id"]

    assert runs.get(first) is None
    assert runs.get(second) is not None and runs.get(third) is not None


async def test_an_idempotent_repeat_of_a_deleted_response_finds_nothing(server: InProcess) -> None:
    # The run stays in memory a while after its response was deleted: a repeat of the request
    # that created it must not read it back from there.
    server.base.script("secret", [Hang()])
    key = {"Idempotency-Key": "k-1"}
    response_id = (await server.submit("secret", background=True, headers=key)).json()["id"]
    assert (await server.client.delete(f"/v1/responses/{response_id}")).status_code == 200
    await server.ctx.runs.cancel(server.run(response_id))

    repeat = await server.submit("secret", background=True, headers=key)
    streamed = await server.submit("secret", stream=True, headers=key)

    assert (repeat.status_code, streamed.status_code) == (404, 404), repeat.text


async def test_a_repeat_waiting_for_a_response_deleted_meanwhile_finds_nothing(
    server: InProcess,
) -> None:
    server.base.script("secret", [Hang()])
    key = {"Idempotency-Key": "k-2"}
    response_id = (await server.submit("secret", background=True, headers=key)).json()["id"]
    repeat = asyncio.create_task(server.submit("secret", headers=key))  # waits for its end
    await asyncio.sleep(0.3)
    assert (await server.client.delete(f"/v1/responses/{response_id}")).status_code == 200
    await server.ctx.runs.cancel(server.run(response_id))

    assert (await asyncio.wait_for(repeat, 10)).status_code == 404


async def test_an_unknown_response_is_404_before_its_stream_headers_are_read(
    server: InProcess,
) -> None:
    for headers in ({"Last-Event-ID": "x"}, {"Last-Event-ID": "1"}):
        answer = await server.client.get("/v1/responses/resp_nope?stream=true", headers=headers)
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["code"] == "response_not_found"
    done = await server.submit("hi")
    bad = await server.client.get(
        f"/v1/responses/{done.json()['id']}?stream=true", headers={"Last-Event-ID": "x"}
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "Last-Event-ID"


async def test_a_revoked_keys_open_streams_are_closed_and_its_tasks_run_on(
    server: InProcess,
) -> None:
    """Revocation takes effect at once for a key's streams too, the one a POST opened, one
    opened later and a harness's feed: each ends within about a second, the tasks
    themselves untouched."""
    server.base.script("long", [TextDelta("m", "partial answer"), Hang()])
    principals = server.app.state.engine.principals
    alice = await principals.named("alice")
    key_id, key = await principals.create_key(alice)
    _, other_key = await principals.create_key(alice)
    bearer, other = {"Authorization": f"Bearer {key}"}, {"Authorization": f"Bearer {other_key}"}
    started = await server.client.post(
        "/v1/responses", json={"input": "long", "background": True}, headers=bearer
    )
    first_id = started.json()["id"]
    read = asyncio.create_task(
        server.client.get(f"/v1/responses/{first_id}?stream=true", headers=bearer)
    )
    posted = asyncio.create_task(
        server.client.post("/v1/responses", json={"input": "long", "stream": True}, headers=bearer)
    )
    harnesses = (await server.client.get("/v1/harnesses", headers=bearer)).json()["harnesses"]
    feed = asyncio.create_task(
        server.client.get(f"/v1/harnesses/{harnesses[0]['id']}/events", headers=bearer)
    )
    await wait_for(lambda: len(server.base.turns) == 2)
    await asyncio.sleep(1.5)
    assert not posted.done() and not read.done() and not feed.done()
    assert await principals.revoke_key(alice, key_id)
    assert (await asyncio.wait_for(feed, timeout=8)).status_code == 200
    ids = []
    for stream in (read, posted):
        answer = await asyncio.wait_for(stream, timeout=8)
        assert answer.status_code == 200
        assert "partial answer" in answer.text  # it was following the turn
        assert "response.completed" not in answer.text and "response.failed" not in answer.text
        ids.append(re.search(r'"id":"(resp_[^"]+)"', answer.text).group(1))  # type: ignore[union-attr]
    assert ids[0] == first_id and ids[1] != first_id
    assert (await server.client.get("/v1/sessions", headers=bearer)).status_code == 401
    for response_id in ids:  # only the streams ended
        still = await server.client.get(f"/v1/responses/{response_id}", headers=other)
        assert still.json()["status"] == "in_progress"
        await server.client.post(f"/v1/responses/{response_id}/cancel", headers=other)
