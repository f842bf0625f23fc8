"""The gateway's translation between two different wires, for the tests and benchmarks that
drive one directly."""

from __future__ import annotations

from uhp_server.gateway.wires import Translation, translation


def translation_between(wire: str, api: str) -> Translation:
    """The translation from `wire` to `api`, two different wires (`translation` gives None
    for a wire passed through untouched)."""
    found = translation(wire, api)
    assert found is not None, f"{wire} to {api} passes through untranslated"
    return found
