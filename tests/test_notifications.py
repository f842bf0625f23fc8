"""The listener of engine/replicas/notifications.py, without a database: stopping it while it lets
go of its reader (to LISTEN or UNLISTEN an on-demand channel) stops it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from uhp_server.engine.replicas.notifications import Notifications


async def test_a_close_while_the_listener_lets_go_of_its_reader_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notes = Notifications("", (), on_demand=("events",))

    async def slow_to_stop(conn: Any) -> None:
        try:
            await asyncio.Future()
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # the reader's way out takes a moment
            raise

    monkeypatch.setattr(notes, "_deliver_all", slow_to_stop)

    async def listening() -> None:
        while True:
            await notes._take_notes(object())

    listener = asyncio.create_task(listening())
    await asyncio.sleep(0.01)
    notes.add_want("events")  # a tail starts: the listener lets go of its reader
    await asyncio.sleep(0.01)
    listener.cancel()  # what Notifications.close() does, in that moment

    done, _ = await asyncio.wait({listener}, timeout=2.0)
    assert done, "the cancel was swallowed: close() would wait for ever"
