"""Finding the sandboxes: every sandbox, built-in or a third party's, registers its Sandbox
subclass in the `uhp_server.sandboxes` entry-point group under the name UHP_SANDBOX chooses
it by (`local`, `docker`). Only the one chosen is imported, so a server never loads the docker
SDK (or a third party's dependencies) for a sandbox it does not run; and, unlike a base that
fails to load (left out with a warning), the chosen sandbox failing to load stops the server:
it cannot run a turn without it.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING

from harness_bases.base import HarnessBase
from uhp_server.sandbox.base import Sandbox

if TYPE_CHECKING:
    from uhp_server.settings import Settings

ENTRY_POINT_GROUP = "uhp_server.sandboxes"


def _entries() -> dict[str, EntryPoint]:
    """The registered entry points by name, in name order (the same distribution seen twice
    on sys.path counts once: the first wins, as for the bases)."""
    found: dict[str, EntryPoint] = {}
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        found.setdefault(entry.name, entry)
    return found


def sandbox_names() -> list[str]:
    """The names UHP_SANDBOX accepts, sorted; nothing is imported to list them."""
    return list(_entries())


def _load(entry: EntryPoint) -> type[Sandbox]:
    """The class an entry point names; TypeError/ValueError (ImportError, …) when unusable."""
    found = entry.load()
    if not (isinstance(found, type) and issubclass(found, Sandbox)):
        raise TypeError(f"{entry.value} is not a Sandbox subclass")
    if inspect.isabstract(found):
        missing = ", ".join(sorted(found.__abstractmethods__))
        raise TypeError(f"{entry.value} does not implement {missing}")
    if getattr(found, "name", None) != entry.name:
        raise ValueError(
            f"{entry.value} is registered as {entry.name!r} but names itself "
            f"{getattr(found, 'name', None)!r}"
        )
    return found


def sandbox_class(name: str) -> type[Sandbox]:
    """The Sandbox subclass registered as `name`. ValueError naming the known ones for a name
    nobody registered; RuntimeError saying why for one that does not load."""
    entries = _entries()
    entry = entries.get(name)
    if entry is None:
        known = ", ".join(entries) or "none"
        raise ValueError(f"unknown sandbox {name!r} (UHP_SANDBOX); known sandboxes: {known}")
    try:
        return _load(entry)
    except Exception as exc:
        raise RuntimeError(f"sandbox {name!r} (UHP_SANDBOX) cannot be loaded: {exc}") from exc


def make_sandbox(settings: Settings, bases: Collection[HarnessBase] = ()) -> Sandbox:
    """The sandbox UHP_SANDBOX names, built from the settings, for the enabled `bases`."""
    return sandbox_class(settings.sandbox).from_settings(settings, bases)
