"""Which end-to-end tests a pass on another base or sandbox runs again.

`scripts/test.sh` runs the end-to-end files once on Codex in the local sandbox, then again on
every other base and in the docker sandbox (and gVisor). Each later pass is there for what
differs with the CLI or the sandbox: a test whose outcome does not is marked, and those passes
leave it out (it is reported as deselected, so a run says how many):

- `same_on_every_base`: the engine's own logic over a real CLI (idempotency, background,
  reattach, the doors' refusals, other principals), which a CLI only has to run a turn for;
- `same_in_every_sandbox`: the same, where the place the CLI runs cannot change the outcome.

What stays in every pass is what a CLI or a sandbox does its own way: its events and streaming,
cancel, resume, questions, instructions, budgets, files, its environment and credentials.
When in doubt a test is not marked: running it again costs time, not correctness.
"""

from __future__ import annotations

import pytest

REFERENCE_BASE = "codex"
REFERENCE_SANDBOX = "local"
SAME_ON_EVERY_BASE = "same_on_every_base"
SAME_IN_EVERY_SANDBOX = "same_in_every_sandbox"

same_on_every_base = pytest.mark.same_on_every_base
same_in_every_sandbox = pytest.mark.same_in_every_sandbox


def split(
    items: list[pytest.Item], base: str, sandbox: str
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, deselected) for a pass on `base` in `sandbox`."""
    left_out: set[str] = set()
    if base != REFERENCE_BASE:
        left_out.add(SAME_ON_EVERY_BASE)
    if sandbox != REFERENCE_SANDBOX:
        left_out.add(SAME_IN_EVERY_SANDBOX)
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        marked = any(item.get_closest_marker(name) for name in left_out)
        (deselected if marked else kept).append(item)
    return kept, deselected
