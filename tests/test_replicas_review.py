"""Review findings on replicas (in process, two apps on one PostgreSQL database): what a
replica keeps in memory for a response running on another must go once that response is over."""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.scripted_provider import RunningProvider
from tests.support import postgres
from tests.test_replicas_fast import _replicas, _running_with_text, _stream, _wait_for

pytestmark = pytest.mark.skipif(
    postgres.TEST_DATABASE != "postgresql",
    reason="replicas share a PostgreSQL database: the PostgreSQL pass runs these",
)


async def test_relayed_cancels_and_streams_leave_no_waiters_behind(
    tmp_path: Path, provider: RunningProvider
) -> None:
    """Each wait on a response of another replica takes a notification event keyed by the
    response id; the last one, taken after the terminal commit's notification, is never set
    and so never dropped. Many turns streamed or cancelled across replicas must not grow the
    table without bound."""
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        notes = b.ctx.runs.cluster.notes
        for _ in range(3):
            response_id = await _running_with_text(a)
            streaming = asyncio.create_task(_stream(b, response_id))
            await asyncio.sleep(0.3)
            cancelled = (await b.client.post(f"/v1/responses/{response_id}/cancel")).json()
            assert cancelled["status"] == "cancelled", cancelled
            await asyncio.wait_for(streaming, 10)

        async def no_waiters() -> bool:
            return not notes._changed

        with contextlib.suppress(AssertionError):
            await _wait_for(no_waiters, 3.0)
        assert not notes._changed, f"left behind: {sorted(notes._changed)}"
