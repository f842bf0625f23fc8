"""Two replicas of the server on one PostgreSQL database, in process (FakeBase,
FakeSandbox): two apps share one database and one data folder, each with its own replica id,
as `serve` processes do. Used by tests/test_replicas_*.py."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from harness_bases.events import TextDelta, TurnFinished
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support import postgres
from tests.support.fakes import Ask, Hang, answer
from tests.support.in_process import InProcess, in_process
from tests.support.sse import Stream, parse_lines
from tests.support.waiting import wait_for
from uhp_server.engine.requests import EngineTask, QuestionPolicy

ONLY_ON_POSTGRESQL = pytest.mark.skipif(
    postgres.TEST_DATABASE != "postgresql",
    reason="replicas share a PostgreSQL database: the PostgreSQL pass runs these",
)

LEASE = 1.0


def replica(
    data_dir: Path, provider: RunningProvider, name: str = "a", **settings: Any
) -> contextlib.AbstractAsyncContextManager[InProcess]:
    """Replica `name` of the server on the data folder's database, with the pair's short
    lease; `settings` as `in_process` takes them."""
    return in_process(
        data_dir,
        provider.base_url,
        PROVIDER_KEY,
        replica_id=name,
        replica_lease_seconds=LEASE,
        **settings,
    )


async def two_replicas(
    stack: AsyncExitStack, data_dir: Path, provider: RunningProvider, **settings: Any
) -> tuple[InProcess, InProcess]:
    a = await stack.enter_async_context(replica(data_dir, provider, "a", **settings))
    b = await stack.enter_async_context(replica(data_dir, provider, "b", **settings))
    return a, b


async def running_with_text(a: InProcess) -> str:
    a.base.script("long", [TextDelta("m", "partial answer"), Hang()])
    response_id = (await a.submit("long", background=True)).json()["id"]

    async def has_text() -> bool:
        run = a.ctx.runs.get(response_id)
        return run is not None and any(e["type"].endswith("delta") for e in run.log.events)

    await wait_for(has_text)
    return response_id


async def stream_of(replica: InProcess, response_id: str) -> Stream:
    async with replica.client.stream(
        "GET", f"/v1/responses/{response_id}?stream=true", timeout=30
    ) as response:
        lines = [line async for line in response.aiter_lines()]
    return parse_lines(lines, Stream())


def completed_on(replica: InProcess, response_id: str) -> Callable[[], Awaitable[bool]]:
    async def completed() -> bool:
        body = (await replica.client.get(f"/v1/responses/{response_id}")).json()
        return bool(body["status"] == "completed")

    return completed


def ended_on(replica: InProcess, response_id: str) -> Callable[[], Awaitable[bool]]:
    """Whether the response, read through `replica`'s API, is no longer in progress."""

    async def ended() -> bool:
        body = (await replica.client.get(f"/v1/responses/{response_id}")).json()
        return bool(body["status"] != "in_progress")

    return ended


async def paused_on(replica: InProcess) -> tuple[str, str]:
    """A turn paused on `replica`, waiting for the user; its principal and response ids."""
    replica.base.script("who", answer("me"))
    first = (await replica.submit("who")).json()["id"]
    principal_id = replica.run(first).principal_id
    replica.base.script("ask", [Ask("Which colour?"), TurnFinished()])
    task = EngineTask(principal_id, None, "ask", questions=QuestionPolicy.pause())
    response_id = (await replica.ctx.engine.start(task)).response_id

    async def asking() -> bool:
        run = replica.ctx.runs.get(response_id)
        return run is not None and bool(run.asking)

    await wait_for(asking)
    return principal_id, response_id


async def finished(run: Any) -> bool:
    """Whether the run's terminal event is written (for `wait_for`)."""
    return bool(run.log.finished)


async def input_required_on(replica: InProcess, principal_id: str, response_id: str) -> bool:
    """Whether `replica` reads the task as waiting for an answer (for `wait_for`)."""
    state = await replica.ctx.engine.state(principal_id, response_id)
    return state.status == "input_required"
