"""The fast tier is `pytest -m "not slow"`: a `heavy` test counts as slow (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = "tests/test_opencode_base.py::test_installed_version_and_install_is_idempotent"
FAST = "tests/test_hermes_config.py::test_skills_are_written_whole_and_replaced_every_turn"


def collected(marks: str) -> list[str]:
    """The test ids `-m marks` keeps of one heavy and one fast test."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marks, HEAVY, FAST],
        cwd=ROOT,
        # not the shard of the pass this runs in (tests/support/shards.py): both tests, always
        env={k: v for k, v in os.environ.items() if k != "UHP_TEST_SHARD"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return [line for line in result.stdout.splitlines() if line.startswith("tests/")]


@pytest.mark.heavy  # two pytest start-ups
def test_not_slow_leaves_out_heavy_tests_and_keeps_fast_ones() -> None:
    assert collected("not slow") == [FAST]
    assert collected("slow") == [HEAVY]
