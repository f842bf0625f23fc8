"""The harness feed's reader of other replicas' turns (engine/replicas/remote_feed.py): a
notification is never lost between a read's end and its bookkeeping."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from uhp_server.engine.reading.feed import HarnessFeed
from uhp_server.engine.replicas.remote_feed import RemoteFeed


class Notes:
    def on(self, channel: str, handler: Any) -> None: ...
    def add_want(self, channel: str) -> None: ...
    def drop_want(self, channel: str) -> None: ...


class NoLocalRuns:
    def get(self, response_id: str) -> None:
        return None


async def test_a_notification_between_a_reads_end_and_its_bookkeeping_reads_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed = HarnessFeed()
    remote = RemoteFeed(None, NoLocalRuns(), feed, Notes())  # type: ignore[arg-type]
    feed.subscribe("p", "h")  # somebody watches: notifications are read
    reads: list[str] = []

    async def pass_on(response_id: str) -> None:
        reads.append(response_id)

    monkeypatch.setattr(remote, "_pass_on", pass_on)
    remote.notified("resp_1")
    first = remote._reading["resp_1"]
    # The read runs to its end; its done callback is only scheduled (call_soon), and a
    # notification (the turn's last commit) is handled before it runs.
    while not first.done():
        await asyncio.sleep(0)
    remote.notified("resp_1")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert reads == ["resp_1", "resp_1"]
    assert "resp_1" not in remote._reading  # both reads' bookkeeping done
