"""Replica leases, two replicas in process on one PostgreSQL database (tests/support/
replica_pair.py): a replica whose lease lapses has its turns failed and reaped by another, and
one cut off from the database, or taken over, lets its turns go."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from bench._runs import output_text
from storage import replicas as replica_store
from storage.unit import Tx
from tests.scripted_provider import RunningProvider
from tests.support.fakes import answer
from tests.support.in_process import InProcess
from tests.support.replica_pair import (
    LEASE,
    ONLY_ON_POSTGRESQL,
    replica,
    running_with_text,
    two_replicas,
)
from tests.support.waiting import wait_for

pytestmark = ONLY_ON_POSTGRESQL


async def _lapsed_and_taken_over(a: InProcess, b: InProcess, response_id: str) -> dict[str, Any]:
    """Stop a's lease renewals until b has ended a's turn; the turn as b stored it."""
    cluster = a.cluster
    assert cluster._loop_task is not None
    cluster._loop_task.cancel()

    async def failed() -> bool:
        body = (await b.client.get(f"/v1/responses/{response_id}")).json()
        return bool(body["status"] == "failed")

    await wait_for(failed, LEASE * 5)
    body: dict[str, Any] = (await b.client.get(f"/v1/responses/{response_id}")).json()
    return body


async def test_a_replica_whose_lease_lapses_has_its_turns_failed_and_reaped_by_another(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        response_id = await running_with_text(a)
        # a stops renewing its lease, as a process killed or cut off from the database does.
        body = await _lapsed_and_taken_over(a, b, response_id)
        assert "replica" in body["error"]["message"]
        assert output_text(body) == "partial answer"

        async def reaped() -> bool:  # just after the turns, by the replica that expired it
            return b.sandbox.reaped == ["a"]

        await wait_for(reaped, LEASE * 5)
        b.base.script("next", answer("on b"))
        follow = await b.submit("next", previous_response_id=response_id)
        assert follow.status_code == 200, follow.text  # the session was released
        leases = a.ctx.db.run(lambda tx: tx.rows("SELECT id FROM replica"))
        assert [row[0] for row in leases] == ["b"]


async def test_a_replica_that_was_taken_over_lets_its_turns_go(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        response_id = await running_with_text(a)
        # a stalls for longer than its lease (its renewals stop), and b takes the turn over.
        stored = await _lapsed_and_taken_over(a, b, response_id)
        assert a.sandbox.running  # the turn's process still runs on a
        # a comes back: at its first renewal it sees the turn is no longer its own.
        cluster = a.cluster
        cluster._loop_task = asyncio.create_task(cluster._keep_lease())
        run = a.run(response_id)

        async def let_go() -> bool:
            return not a.sandbox.running and run.log.finished

        await wait_for(let_go, LEASE * 5)
        assert run.log.current()["status"] == "failed"
        assert "replica" in run.log.current()["error"]["message"]
        assert (await b.client.get(f"/v1/responses/{response_id}")).json() == stored


async def test_a_replica_cut_off_from_the_database_stops_its_turns_and_ends_them_when_back(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with replica(tmp_path, provider) as a:
        response_id = await running_with_text(a)
        renew = replica_store.renew_lease
        cut_off = True

        def renew_unless_cut_off(tx: Tx, replica_id: str, lease: float) -> bool:
            if cut_off:
                raise ConnectionError("the database is out of reach")
            return renew(tx, replica_id, lease)

        monkeypatch.setattr(replica_store, "renew_lease", renew_unless_cut_off)
        run = a.run(response_id)

        async def stopped() -> bool:
            return not a.sandbox.running and run.log.finished

        await wait_for(stopped, LEASE * 5)  # nobody took it over: no other replica
        assert run.log.current()["status"] == "failed"
        cut_off = False

        async def ended_in_the_database() -> bool:
            statement = "SELECT status FROM response WHERE id = :id"
            status = a.ctx.db.run(lambda tx: tx.rows(statement, {"id": response_id}))
            return bool(status[0][0] == "failed")

        await wait_for(ended_in_the_database, LEASE * 5)
        a.ctx.runs.forget(response_id)  # read back from the database, not from memory
        body = (await a.client.get(f"/v1/responses/{response_id}")).json()
        assert "replica" in body["error"]["message"] and output_text(body) == "partial answer"
        a.base.script("next", answer("again"))
        follow = await a.submit("next", previous_response_id=response_id)
        assert follow.status_code == 200, follow.text  # its session was released
        assert follow.json()["status"] == "completed"


async def test_a_second_process_with_the_same_replica_id_refuses_to_start(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with replica(tmp_path, provider, "same") as first:
        response_id = await running_with_text(first)
        with pytest.raises(RuntimeError, match="UHP_REPLICA_ID"):
            async with replica(tmp_path, provider, "same"):
                pass
        run = first.ctx.runs.get(response_id)
        assert run is not None and not run.log.finished  # its turn was left alone


async def test_a_replica_whose_renewal_hangs_stops_its_turns_when_its_lease_lapses(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cut off by a dropped link (no reset: packets lost), a renewal does not fail, it hangs
    # for as long as TCP retries (minutes): other replicas take the turns over once the lease
    # lapses, so this replica must let them go by the clock, not at the renewal's failure.
    import threading

    reachable = threading.Event()
    async with replica(tmp_path, provider) as a:
        try:
            response_id = await running_with_text(a)
            renew = replica_store.renew_lease

            def renew_when_reachable(tx: Tx, replica_id: str, lease: float) -> bool:
                reachable.wait(timeout=30)
                return renew(tx, replica_id, lease)

            monkeypatch.setattr(replica_store, "renew_lease", renew_when_reachable)
            assert a.ctx.runs.get(response_id) is not None

            async def stopped() -> bool:
                return not a.sandbox.running

            await wait_for(stopped, LEASE * 5)
        finally:
            reachable.set()


async def test_a_given_up_turn_whose_session_release_failed_once_frees_its_session(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ending a given-up turn is two steps (its closing events, then its session's release),
    # right after the database came back, when a second hiccup is most likely: a release that
    # fails once must be tried again, not forgotten with the session left busy for good.
    from storage import sessions as session_store

    async with replica(tmp_path, provider) as a:
        response_id = await running_with_text(a)
        session_id = a.run(response_id).session_id
        renew, release = replica_store.renew_lease, session_store.release_session
        cut_off, hiccups = True, [ConnectionError("the database went away again")]

        def renew_unless_cut_off(tx: Tx, replica_id: str, lease: float) -> bool:
            if cut_off:
                raise ConnectionError("the database is out of reach")
            return renew(tx, replica_id, lease)

        def release_after_a_hiccup(*args: Any) -> None:
            if hiccups:
                raise hiccups.pop()
            release(*args)

        monkeypatch.setattr(replica_store, "renew_lease", renew_unless_cut_off)
        monkeypatch.setattr(session_store, "release_session", release_after_a_hiccup)
        run = a.run(response_id)

        async def stopped() -> bool:
            return not a.sandbox.running and run.log.finished

        await wait_for(stopped, LEASE * 5)
        cut_off = False

        async def session_free() -> bool:
            statement = "SELECT active_response_id FROM session WHERE id = :id"
            active = a.ctx.db.run(lambda tx: tx.rows(statement, {"id": session_id}))
            return active[0][0] is None

        await wait_for(session_free, LEASE * 8)
        assert not hiccups  # the release did meet its hiccup


async def test_a_replica_whose_renewals_are_slow_but_succeed_keeps_its_turns(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A busy writer delays each renewal by a little over a third of a lease; every renewal
    # still lands well within the lease (each one a little over two thirds of a lease after
    # the last), so the replica's lease never lapses and it must keep its turns.
    async with replica(tmp_path, provider) as a:
        response_id = await running_with_text(a)
        run = a.run(response_id)
        renew = replica_store.renew_lease

        def renew_behind_a_busy_writer(tx: Tx, replica_id: str, lease: float) -> bool:
            time.sleep(LEASE * 0.4)
            return renew(tx, replica_id, lease)

        monkeypatch.setattr(replica_store, "renew_lease", renew_behind_a_busy_writer)
        await asyncio.sleep(LEASE * 4)
        assert not run.abandoned
        assert a.sandbox.running


async def test_a_renewal_that_succeeds_during_an_event_loop_stall_keeps_the_turns(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The renewal commits on the writer thread while the event loop is stalled (a long
    # synchronous call) for most of a lease: the lease was renewed in time, yet when the loop
    # wakes, the third-of-a-lease timeout is handled before the renewal's result reaches it.
    async with replica(tmp_path, provider) as a:
        response_id = await running_with_text(a)
        run = a.run(response_id)
        renew, loop, stalls = replica_store.renew_lease, asyncio.get_running_loop(), [1]

        def renew_while_the_loop_stalls(tx: Tx, replica_id: str, lease: float) -> bool:
            if stalls:
                stalls.pop()
                loop.call_soon_threadsafe(time.sleep, LEASE * 0.8)
                time.sleep(LEASE * 0.1)  # the loop is stalled by now
            return renew(tx, replica_id, lease)

        monkeypatch.setattr(replica_store, "renew_lease", renew_while_the_loop_stalls)
        await asyncio.sleep(LEASE * 3)
        assert not stalls
        assert not run.abandoned
        assert a.sandbox.running
