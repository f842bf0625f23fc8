"""http/while_allowed.py: a stream's source passed on while its caller may still read it,
asked again at most once a period whether items flow or not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from uhp_server.http.while_allowed import while_allowed


async def _ticks(count: int, every: float) -> AsyncIterator[int]:
    for n in range(count):
        await asyncio.sleep(every)
        yield n


async def test_every_item_passes_while_allowed_and_it_is_asked_once_a_period_not_per_item() -> None:
    asked = 0

    async def allowed() -> bool:
        nonlocal asked
        asked += 1
        return True

    got = [n async for n in while_allowed(_ticks(30, 0.01), allowed, every=0.1)]
    assert got == list(range(30))
    assert 1 <= asked <= 6  # about 0.3 s of items: a few asks, never thirty


async def test_a_no_ends_it_even_while_the_source_is_quiet() -> None:
    answers = iter([True, False])

    async def allowed() -> bool:
        return next(answers)

    async def quiet() -> AsyncIterator[int]:
        yield 1
        await asyncio.Event().wait()  # never another item, never an end
        yield 2

    got = await asyncio.wait_for(_all(while_allowed(quiet(), allowed, every=0.05)), timeout=5)
    assert got == [1]


async def test_the_sources_error_is_raised_to_the_reader() -> None:
    async def broken() -> AsyncIterator[int]:
        yield 1
        raise ValueError("the source failed")

    async def allowed() -> bool:
        return True

    with pytest.raises(ValueError, match="the source failed"):
        await _all(while_allowed(broken(), allowed, every=0.05))


async def _all(items: AsyncIterator[int]) -> list[int]:
    return [n async for n in items]


async def test_a_slow_reader_holds_the_source_back() -> None:
    """The source is read at most PUMP_AHEAD items ahead of the reader, as it would be
    without the check: a stream's memory stays bounded however slowly its client reads."""
    from uhp_server.http.while_allowed import PUMP_AHEAD

    produced = 0

    async def source() -> AsyncIterator[int]:
        nonlocal produced
        for n in range(10 * PUMP_AHEAD):
            produced += 1
            yield n

    async def yes() -> bool:
        return True

    stream = while_allowed(source(), yes)
    first = await anext(stream)
    await asyncio.sleep(0.05)  # the pump runs ahead while the reader does not read
    assert first == 0
    assert produced <= PUMP_AHEAD + 2
    rest = [item async for item in stream]
    assert rest == list(range(1, 10 * PUMP_AHEAD))
