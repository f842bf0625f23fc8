"""Finding the bases: every base, built-in or a third party's, registers itself through the
`uhp_server.bases` entry-point group (name = the protocol's `base` string, value = its
HarnessBase subclass). A base that fails to load, or leaves out a declaration, is left out
with a warning naming it and why; the others still load.
"""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint, entry_points

from harness_bases.base import HarnessBase, missing_declarations

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "uhp_server.bases"


def _load(entry: EntryPoint) -> HarnessBase:
    """The base an entry point names; ValueError/TypeError/ImportError when it is unusable."""
    found = entry.load()
    base = found() if isinstance(found, type) else found
    if not isinstance(base, HarnessBase):
        raise TypeError(f"{entry.value} is not a HarnessBase")
    missing = missing_declarations(base)
    if missing:
        raise ValueError(f"it does not declare {', '.join(missing)}")
    if base.name != entry.name:
        raise ValueError(f"it is registered as {entry.name!r} but names itself {base.name!r}")
    return base


def registry() -> dict[str, HarnessBase]:
    """Every registered base that loads, by name, in name order."""
    bases: dict[str, HarnessBase] = {}
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if entry.name in bases:
            continue  # the same distribution seen twice on sys.path
        try:
            bases[entry.name] = _load(entry)
        except Exception as exc:
            log.warning(
                "base_not_loaded",
                extra={"base": entry.name, "entry_point": entry.value, "error": str(exc)},
            )
    return bases
