"""The per-base and per-sandbox passes leave out only what was marked as not depending on
them (tests/support/passes.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests.support import passes


@dataclass
class _Item:
    name: str
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.markers else None


ITEMS = [
    _Item("cli_events"),
    _Item("idempotency", {passes.SAME_ON_EVERY_BASE, passes.SAME_IN_EVERY_SANDBOX}),
    _Item("keyring", {passes.SAME_ON_EVERY_BASE}),
    _Item("model_change", {passes.SAME_IN_EVERY_SANDBOX}),
]


def _kept(base: str, sandbox: str) -> list[str]:
    kept, deselected = passes.split(cast(list[pytest.Item], ITEMS), base=base, sandbox=sandbox)
    assert len(kept) + len(deselected) == len(ITEMS)
    return [cast(_Item, item).name for item in kept]


def test_the_reference_pass_runs_everything() -> None:
    assert _kept("codex", "local") == ["cli_events", "idempotency", "keyring", "model_change"]


def test_another_base_runs_what_depends_on_the_cli() -> None:
    assert _kept("opencode", "local") == ["cli_events", "model_change"]


def test_another_sandbox_runs_what_depends_on_the_sandbox() -> None:
    assert _kept("codex", "docker") == ["cli_events", "keyring"]


def test_the_markers_are_registered(pytestconfig: pytest.Config) -> None:
    registered = " ".join(pytestconfig.getini("markers"))
    assert f"{passes.SAME_ON_EVERY_BASE}:" in registered
    assert f"{passes.SAME_IN_EVERY_SANDBOX}:" in registered
