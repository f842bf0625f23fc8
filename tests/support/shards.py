"""One of N shards of a run, whole test files each: `UHP_TEST_SHARD=2/3`.

CI runs the whole suite as a few shards side by side with the per-base passes
(`scripts/test.sh`), so that no single pass is the long pole. A file stays whole in one shard
(its module-scoped servers start once). Files are dealt longest first to the lightest shard,
weighed by an estimate of their run time: a slow (end-to-end) test costs about as much as
forty in-process ones. The deal depends only on what was collected, so the shards of one
checkout partition its tests: every test runs in exactly one of them.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import pytest

SLOW_TEST_WEIGHT = 6.0  # seconds, about, on the 2-core machine
FAST_TEST_WEIGHT = 0.15


@dataclass(frozen=True)
class Shard:
    number: int  # 1-based
    of: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`i/n` with 1 <= i <= n."""
        number, _, of = text.partition("/")
        try:
            shard = cls(int(number), int(of))
        except ValueError:
            raise pytest.UsageError(f"UHP_TEST_SHARD={text!r}: expected i/n, as 2/3") from None
        if not 1 <= shard.number <= shard.of:
            raise pytest.UsageError(f"UHP_TEST_SHARD={text!r}: i must be between 1 and n")
        return shard


def _weight(item: pytest.Item) -> float:
    return SLOW_TEST_WEIGHT if item.get_closest_marker("slow") else FAST_TEST_WEIGHT


def split(items: list[pytest.Item], shard: Shard) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, deselected): the items of the files dealt to `shard`."""
    weights: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        weights[path] = weights.get(path, 0.0) + _weight(item)
    heaviest_first = sorted(weights, key=lambda path: (-weights[path], path))
    loads = [(0.0, number) for number in range(1, shard.of + 1)]
    owner: dict[str, int] = {}
    for path in heaviest_first:
        load, number = heapq.heappop(loads)
        owner[path] = number
        heapq.heappush(loads, (load + weights[path], number))
    kept = [item for item in items if owner[item.nodeid.split("::", 1)[0]] == shard.number]
    deselected = [item for item in items if owner[item.nodeid.split("::", 1)[0]] != shard.number]
    return kept, deselected
