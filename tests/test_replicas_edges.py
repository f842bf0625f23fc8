"""Review findings on replicas (in process, two apps on one PostgreSQL database): what a
replica keeps in memory for a response running on another must go once that response is over."""

from __future__ import annotations

import asyncio
import contextlib
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench._runs import output_text
from storage import keys
from storage import replicas as replica_store
from storage.db import EVENTS_CHANNEL
from tests.scripted_provider import RunningProvider
from tests.support.fake_engine import CONNECTION, StandInBase
from tests.support.fakes import answer
from tests.support.in_process import InProcess
from tests.support.replica_pair import (
    LEASE,
    ONLY_ON_POSTGRESQL,
    replica,
    running_with_text,
    stream_of,
    two_replicas,
)
from tests.support.waiting import wait_for
from uhp_server.engine.replicas import notifications
from uhp_server.engine.requests import EngineTask, QuestionPolicy, ToolAnswer

pytestmark = ONLY_ON_POSTGRESQL


async def test_relayed_cancels_and_streams_leave_no_waiters_behind(
    tmp_path: Path, provider: RunningProvider
) -> None:
    """Each wait on a response of another replica takes a notification event keyed by the
    response id; the last one, taken after the terminal commit's notification, is never set
    and so never dropped. Many turns streamed or cancelled across replicas must not grow the
    table without bound."""
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        notes = b.cluster.notes
        for _ in range(3):
            response_id = await running_with_text(a)
            streaming = asyncio.create_task(stream_of(b, response_id))
            await asyncio.sleep(0.3)
            cancelled = (await b.client.post(f"/v1/responses/{response_id}/cancel")).json()
            assert cancelled["status"] == "cancelled", cancelled
            await asyncio.wait_for(streaming, 10)

        async def no_waiters() -> bool:
            return not notes._changed

        with contextlib.suppress(AssertionError):
            await wait_for(no_waiters, 3.0)
        assert not notes._changed, f"left behind: {sorted(notes._changed)}"


async def test_commits_of_events_are_heard_only_while_a_tail_here_wants_them(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every commit of events on any replica is told on uhp_events: a replica tailing none of
    # another's turns (and with nobody on its feed) must not take each of them only to drop it.
    monkeypatch.setattr(notifications, "LINGER_SECONDS", 0.5)
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        notes = b.cluster.notes
        heard: list[str] = []
        deliver = notes._deliver

        def hearing(channel: str, payload: str) -> None:
            if channel == EVENTS_CHANNEL:
                heard.append(payload)
            deliver(channel, payload)

        monkeypatch.setattr(notes, "_deliver", hearing)
        a.base.script("short", answer("done"))

        async def a_turn_unheard_on_b() -> None:
            response_id = (await a.submit("short")).json()["id"]
            await asyncio.sleep(0.5)  # its commits' notifications had time to arrive
            assert response_id not in heard

        await a_turn_unheard_on_b()

        tailed = await running_with_text(a)
        streaming = asyncio.create_task(stream_of(b, tailed))
        await asyncio.sleep(0.3)
        await a.client.post(f"/v1/responses/{tailed}/cancel")
        stream = await asyncio.wait_for(streaming, 10)
        assert stream.events[-1]["type"] == "response.failed"
        assert tailed in heard  # its last commit reached the tail by notification

        await wait_for(lambda: not notes._heard_event(EVENTS_CHANNEL).is_set(), 5)
        await a_turn_unheard_on_b()  # let go once the linger is over


async def _told(listener: psycopg.AsyncConnection[Any], seconds: float) -> list[str]:
    """The payloads `listener` was told on uhp_events within `seconds`."""
    return [note.payload async for note in listener.notifies(timeout=seconds)]


async def _connection(stack: AsyncExitStack, conninfo: str) -> psycopg.AsyncConnection[Any]:
    return await stack.enter_async_context(
        await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    )


async def _outsider(stack: AsyncExitStack, conninfo: str) -> psycopg.AsyncConnection[Any]:
    """A connection that LISTENs to uhp_events but is no replica: it never says it hears."""
    conn = await _connection(stack, conninfo)
    await conn.execute(f'LISTEN "{EVENTS_CHANNEL}"')
    return conn


async def _hears_events(conn: psycopg.AsyncConnection[Any], replica_id: str) -> bool | None:
    """The replica's flag; None while it has no row."""
    found = await conn.execute("SELECT hears_events FROM replica WHERE id = %s", (replica_id,))
    row = await found.fetchone()
    return None if row is None else bool(row[0])


_INSERT_EVENT = "INSERT INTO event (response_id, seq, data) VALUES (%s, %s, '{}')"


async def _a_turn_done_and_b(
    stack: AsyncExitStack, tmp_path: Path, provider: RunningProvider
) -> tuple[str, str, str]:
    """Two replicas: a turn done on a (more events can go under it), b's replica id, and the
    database's connection string."""
    a, b = await two_replicas(stack, tmp_path, provider)
    a.base.script("short", answer("done"))
    response_id = (await a.submit("short")).json()["id"]
    cluster = b.cluster
    return response_id, cluster.replica_id, str(cluster.db.dialect.conninfo)


async def test_commits_of_events_are_told_only_while_a_replica_hears_them(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A NOTIFY nobody hears still holds a cluster-wide lock through its commit's WAL flush:
    # the commits of events tell nothing while no replica listens to them.
    monkeypatch.setattr(notifications, "LINGER_SECONDS", 0.5)
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        a.base.script("short", answer("done"))
        cluster = b.cluster
        outsider = await _outsider(stack, str(cluster.db.dialect.conninfo))
        unheard = (await a.submit("short")).json()["id"]
        assert unheard not in await _told(outsider, 0.5)
        async with cluster.events_heard():
            heard = (await a.submit("short")).json()["id"]
            assert heard in await _told(outsider, 0.5)

        async def let_go() -> bool:
            return await _hears_events(outsider, cluster.replica_id) is False

        await wait_for(let_go, 5)
        after = (await a.submit("short")).json()["id"]
        assert after not in await _told(outsider, 0.5)


async def test_a_replica_starting_to_hear_events_waits_for_the_transactions_under_way(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A commit that checked before the replica's flag landed told nobody: it must have landed
    # before the replica's first read, or a tail would miss it until its next poll. Yet a
    # transaction left open must stall neither the replica for long nor anybody's commits.
    monkeypatch.setattr(replica_store, "UNDER_WAY_WAIT_SECONDS", 2.5)
    async with AsyncExitStack() as stack:
        response_id, replica_id, conninfo = await _a_turn_done_and_b(stack, tmp_path, provider)
        outsider = await _outsider(stack, conninfo)
        open_one, other, hearer = [await _connection(stack, conninfo) for _ in range(3)]
        await open_one.execute("BEGIN")
        await open_one.execute(_INSERT_EVENT, (response_id, 1000))  # checked: nobody hears
        starting = asyncio.create_task(replica_store.hear_events(hearer, replica_id, True))
        await asyncio.sleep(0.3)
        assert not starting.done()  # it waits for that transaction
        await asyncio.wait_for(other.execute(_INSERT_EVENT, (response_id, 1001)), 0.5)
        await open_one.execute("COMMIT")
        await asyncio.wait_for(starting, 1)  # at once, not at the end of its wait
        assert response_id in await _told(outsider, 0.1)  # 1001 was told: the flag had landed

        # One left open past the wait: the replica hears on, its tails poll for that one.
        await open_one.execute("BEGIN")
        await open_one.execute(_INSERT_EVENT, (response_id, 1002))
        started = time.monotonic()
        await asyncio.wait_for(replica_store.hear_events(hearer, replica_id, True), 4)
        assert time.monotonic() - started > 2.4
        await open_one.execute("ROLLBACK")


async def test_a_writer_that_took_its_id_while_the_flag_waited_for_its_row_is_waited_for(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The flag's UPDATE waits for the replica's row (a renewal holds it); meanwhile a writer
    # takes a newer transaction id and checks: nobody hears. No transaction newer than it had
    # ended when the flag landed, so a snapshot taken then would not list it.
    monkeypatch.setattr(replica_store, "UNDER_WAY_WAIT_SECONDS", 2.5)
    async with AsyncExitStack() as stack:
        response_id, replica_id, conninfo = await _a_turn_done_and_b(stack, tmp_path, provider)
        holder, writer, hearer = [await _connection(stack, conninfo) for _ in range(3)]
        await holder.execute("BEGIN")
        await holder.execute("SELECT 1 FROM replica WHERE id = %s FOR UPDATE", (replica_id,))
        starting = asyncio.create_task(replica_store.hear_events(hearer, replica_id, True))
        await asyncio.sleep(0.2)  # its UPDATE waits for the row
        await writer.execute("BEGIN")
        await writer.execute(_INSERT_EVENT, (response_id, 1000))
        await holder.execute("COMMIT")
        await asyncio.sleep(0.3)
        assert not starting.done()  # it waits for the writer
        await writer.execute("COMMIT")
        await asyncio.wait_for(starting, 1)


async def test_a_replica_whose_lapsed_lease_was_made_anew_says_again_that_it_hears(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # Another replica deletes an expired lease; the renewal makes the row anew, hearing
    # nothing, while this replica still listens: its listening connection must say so again.
    async with AsyncExitStack() as stack:
        _, b = await two_replicas(stack, tmp_path, provider)
        cluster = b.cluster
        outsider = await _outsider(stack, str(cluster.db.dialect.conninfo))
        async with cluster.events_heard():
            assert await _hears_events(outsider, cluster.replica_id) is True
            await outsider.execute("DELETE FROM replica WHERE id = %s", (cluster.replica_id,))

            async def made_anew() -> bool:
                return await _hears_events(outsider, cluster.replica_id) is not None

            await wait_for(made_anew, LEASE * 3)
            await wait_for(lambda: _hears_events(outsider, cluster.replica_id), 2)


async def _asking_replicas(
    stack: AsyncExitStack, data_dir: Path, provider: RunningProvider
) -> tuple[InProcess, InProcess]:
    started = []
    for name in ("a", "b"):
        base = StandInBase()
        started_replica = replica(
            data_dir,
            provider,
            name,
            base=base,
            model_connection_allow_private_hosts=True,
        )
        running = await stack.enter_async_context(started_replica)
        base.runs = running.ctx.runs
        started.append(running)
    a, b = started
    return a, b


async def test_a_question_asked_on_one_replica_is_seen_and_answered_on_the_other(
    tmp_path: Path, provider: RunningProvider
) -> None:
    """Behind a balancer without stickiness (docs/scale-out.md: "any replica serves any
    request"), a client polls a task and answers its question through whichever replica it
    reaches. While the asking turn is alive on replica a, replica b reads the task as
    `in_progress` and refuses the answer (409 not_waiting)."""
    async with AsyncExitStack() as stack:
        a, b = await _asking_replicas(stack, tmp_path, provider)
        principal_id = a.ctx.db.run(keys.ensure_principal, keys.DEFAULT_PRINCIPAL).id
        accepted = await a.ctx.engine.start(
            EngineTask(
                principal_id=principal_id,
                harness_id=None,
                input="ASK Which city?",
                model_connection=CONNECTION,
                questions=QuestionPolicy.pause(),
            )
        )
        response_id = accepted.response_id

        async def asking_on_a() -> bool:
            state = await a.ctx.engine.state(principal_id, response_id)
            return state.status == "input_required"

        await wait_for(asking_on_a)
        (question,) = (await a.ctx.engine.state(principal_id, response_id)).questions
        seen_on_b = await b.ctx.engine.state(principal_id, response_id)
        assert seen_on_b.status == "input_required", seen_on_b.status
        answers = [ToolAnswer(question.call_id, "Paris")]
        await b.ctx.engine.answer(principal_id, response_id, answers)


async def test_a_task_cancelled_while_its_replica_is_dead_ends_cancelled(
    tmp_path: Path, provider: RunningProvider
) -> None:
    """Sessions §4: a cancelled task MUST end `cancelled`, never `failed`. The cancel of a
    turn whose replica died is recorded (cancel_requested) and answered 200, but the replica
    that takes the turn over ends it `failed` ("The server replica running this task
    stopped.") without looking at the request."""
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        response_id = await running_with_text(a)
        cluster = a.cluster
        assert cluster._loop_task is not None
        cluster._loop_task.cancel()  # a renews no lease and hears no cancel: as if killed
        await cluster.notes.close()
        cancel = await b.client.post(f"/v1/responses/{response_id}/cancel")
        assert cancel.status_code == 200, cancel.text

        async def over() -> bool:
            body = (await b.client.get(f"/v1/responses/{response_id}")).json()
            return bool(body["status"] != "in_progress")

        await wait_for(over, LEASE * 5)
        body = (await b.client.get(f"/v1/responses/{response_id}")).json()
        assert body["status"] == "cancelled", body
        assert output_text(body) == "partial answer"  # output before the cancel is kept
