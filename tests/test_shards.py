"""tests/support/shards.py: CI's shards of the whole suite partition it by whole files."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import cast

import pytest

from tests.support.shards import Shard, split


@dataclass
class FakeItem:
    nodeid: str
    slow: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def items() -> list[pytest.Item]:
    made = [
        FakeItem(f"tests/test_e2e_{n}.py::test_{k}", slow=True)
        for n in range(5)
        for k in range(n + 1)
    ]
    made += [FakeItem(f"tests/test_fast_{n}.py::test_{k}") for n in range(7) for k in range(30)]
    return cast(list[pytest.Item], made)


@pytest.mark.parametrize("of", [1, 2, 3])
def test_every_test_runs_in_exactly_one_shard_and_a_file_stays_whole(of: int) -> None:
    everything = items()
    seen: list[str] = []
    files_per_shard: list[set[str]] = []
    for number in range(1, of + 1):
        kept, deselected = split(everything, Shard(number, of))
        assert len(kept) + len(deselected) == len(everything)
        seen += [item.nodeid for item in kept]
        files_per_shard.append({item.nodeid.split("::")[0] for item in kept})
    assert sorted(seen) == sorted(item.nodeid for item in everything)
    for one, other in itertools.combinations(files_per_shard, 2):
        assert not one & other


def test_the_slow_files_are_spread_over_the_shards() -> None:
    kept, _ = split(items(), Shard(1, 2))
    slow = sum(1 for item in kept if item.get_closest_marker("slow"))
    assert 5 <= slow <= 10  # of 15 slow tests, in files of 1..5: neither shard holds them all


@pytest.mark.parametrize("text", ["0/2", "3/2", "two", "1-2", ""])
def test_a_malformed_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(pytest.UsageError):
        Shard.parse(text)
