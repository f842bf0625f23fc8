"""Finding the wires: every wire format, built-in or a third party's, registers its `Wire`
object through the `uhp_server.wires` entry-point group (name = the wire's string, value =
the object), as bases do through `uhp_server.bases`. A wire that fails to load, is not a
Wire, or disagrees with the wires already on its backend is left out with a warning naming
it and why; the others still load. Read once per process: the gateway asks on every call.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType

from uhp_server.gateway.wires.base import ProviderApi, Wire

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "uhp_server.wires"


def _load(entry: EntryPoint) -> Wire:
    """The wire an entry point names; ValueError/TypeError/ImportError when it is unusable."""
    wire = entry.load()
    if not isinstance(wire, Wire):
        raise TypeError(f"{entry.value} is not a Wire")
    if wire.as_api is not None and not isinstance(wire.as_api, ProviderApi):
        raise TypeError(f"{entry.value}: its as_api is not a ProviderApi")
    if wire.name != entry.name:
        raise ValueError(f"it is registered as {entry.name!r} but names itself {wire.name!r}")
    return wire


def _agrees(wire: Wire, loaded: dict[str, Wire]) -> None:
    """A backend has one base URL: its wires must agree on the version in it."""
    for other in loaded.values():
        if other.backend == wire.backend and (
            other.version_in_base_url != wire.version_in_base_url
        ):
            raise ValueError(f"its version_in_base_url disagrees with {other.name!r}'s")


@functools.cache
def wires() -> Mapping[str, Wire]:
    """Every registered wire that loads, by name, in rank order (then name order)."""
    loaded: dict[str, Wire] = {}
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if entry.name in loaded:
            continue  # the same distribution seen twice on sys.path
        try:
            wire = _load(entry)
            _agrees(wire, loaded)
        except Exception as exc:
            log.warning(
                "wire_not_loaded",
                extra={"wire": entry.name, "entry_point": entry.value, "error": str(exc)},
            )
            continue
        loaded[entry.name] = wire
    return MappingProxyType(dict(sorted(loaded.items(), key=lambda item: (item[1].rank, item[0]))))


def wire_named(name: str) -> Wire:
    """The wire called `name`; ValueError when none is registered."""
    try:
        return wires()[name]
    except KeyError:
        raise ValueError(f"unknown wire: {name!r}") from None


def api_named(name: str) -> ProviderApi:
    """The provider API called `name`; ValueError when no registered wire is one."""
    api = wires()[name].as_api if name in wires() else None
    if api is None:
        raise ValueError(f"unknown provider API: {name!r}")
    return api


def api_names() -> tuple[str, ...]:
    """The wires a provider may serve, in rank order."""
    return tuple(name for name, wire in wires().items() if wire.as_api is not None)


def backends() -> tuple[str, ...]:
    """The gateway's backends, in the rank order of their first wire."""
    return tuple(dict.fromkeys(wire.backend for wire in wires().values()))


def on_backend(backend: str) -> tuple[Wire, ...]:
    """The wires whose CLIs call `backend`, in rank order."""
    return tuple(wire for wire in wires().values() if wire.backend == backend)
