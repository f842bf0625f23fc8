"""Configured harnesses: the wire shape (camelCase), and the defaults every principal gets."""

from __future__ import annotations

import time

from harness_bases.base import HarnessBase
from storage import harnesses as harness_store
from storage.tables import HarnessRow
from storage.unit import Tx
from uhp_server.ids import new_id


def ensure_defaults(
    tx: Tx, principal_id: str, bases: dict[str, HarnessBase]
) -> dict[str, HarnessRow]:
    """Give the principal one default harness per enabled base, without any configuration;
    returns them by base."""
    found = harness_store.defaults_of(tx, principal_id)
    for name, base in bases.items():
        if name not in found:
            found[name] = harness_store.insert_harness(
                tx,
                HarnessRow(
                    id=new_id("harness"),
                    principal_id=principal_id,
                    name=f"{base.label} (default)",
                    base=name,
                    config={},
                    created_at_ms=int(time.time() * 1000),
                    is_default=True,
                ),
            )
    return found


def default_harness(tx: Tx, principal_id: str, bases: dict[str, HarnessBase]) -> HarnessRow | None:
    """The harness a task without `metadata.harness_id` runs on: the first enabled base's,
    which is the default base (harnesses/default_base.py orders them)."""
    found = ensure_defaults(tx, principal_id, bases)
    return next((found[name] for name in bases if name in found), None)


def made_default(tx: Tx, principal_id: str, bases: dict[str, HarnessBase]) -> HarnessRow | None:
    """`default_harness` without writing: None when some of the principal's defaults are not
    made yet (then `default_harness`, on the writer, makes them)."""
    return first_default(harness_store.defaults_of(tx, principal_id), bases)


def first_default(found: dict[str, HarnessRow], bases: dict[str, HarnessBase]) -> HarnessRow | None:
    """Of the principal's defaults by base, the first enabled base's; None when some enabled
    base has none yet."""
    if any(name not in found for name in bases):
        return None
    return next((found[name] for name in bases), None)


def defaults_first(rows: list[HarnessRow], bases: dict[str, HarnessBase]) -> list[HarnessRow]:
    """A principal's harnesses as listed: its default ones in the bases' order (the one a task
    without `metadata.harness_id` runs on first, so a client taking the first listed takes
    it), then the others as stored (oldest first). Defaults are made in one millisecond, so
    their stored order alone would be their random ids'."""
    order = {name: i for i, name in enumerate(bases)}

    def rank(row: HarnessRow) -> tuple[int, int]:
        if row.is_default and row.base in order:
            return (0, order[row.base])
        return (1, 0)

    return sorted(rows, key=rank)  # stable: the others keep their stored order
