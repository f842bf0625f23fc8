"""Finding the memory providers: every provider, built-in or a third party's, registers a
`ProviderFactory` in the `uhp_server.memory_providers` entry-point group under its name
(`embedded`, `mem0`). Only those UHP_MEMORY_PROVIDERS names are imported, so a server never
loads mem0 (or a third party's dependencies) for a provider it does not connect to; one named
that does not load, or cannot be built, stops the server saying why: a memory bound to it
could not be read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Protocol, runtime_checkable

from storage.db import Database
from uhp_server.memories.provider import Embedder, MemoryProvider

ENTRY_POINT_GROUP = "uhp_server.memory_providers"


class ProviderSetupError(RuntimeError):
    """A provider named by UHP_MEMORY_PROVIDERS cannot be used; the message says why."""


@dataclass(frozen=True)
class ProviderSetup:
    """What a provider is built from: the server's database, the embedder when one is
    configured (UHP_MEMORY_EMBEDDING_MODEL), and a folder of its own in the data dir."""

    db: Database
    embedder: Embedder | None
    folder: Path


@runtime_checkable
class ProviderFactory(Protocol):
    name: str  # the entry point's name, and the provider's id

    def build(self, setup: ProviderSetup) -> MemoryProvider: ...


def _entries() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        found.setdefault(entry.name, entry)
    return found


def provider_names() -> list[str]:
    """The names UHP_MEMORY_PROVIDERS accepts, sorted; nothing is imported to list them."""
    return list(_entries())


def factory(name: str) -> ProviderFactory:
    entries = _entries()
    entry = entries.get(name)
    if entry is None:
        known = ", ".join(entries) or "none"
        raise ProviderSetupError(
            f"unknown memory provider {name!r} (UHP_MEMORY_PROVIDERS); known: {known}"
        )
    try:
        found = entry.load()
    except Exception as exc:  # an ImportError above all: an extra not installed
        raise ProviderSetupError(
            f"memory provider {name!r} (UHP_MEMORY_PROVIDERS) cannot be loaded: {exc}"
        ) from exc
    if not isinstance(found, ProviderFactory) or found.name != name:
        raise ProviderSetupError(
            f"{entry.value} is registered as memory provider {name!r} but is not a "
            f"ProviderFactory of that name"
        )
    return found


def named_providers(setting: str) -> list[str]:
    """UHP_MEMORY_PROVIDERS as names, in order, each once; at least one."""
    names = list(dict.fromkeys(n.strip() for n in setting.split(",") if n.strip()))
    if not names:
        raise ProviderSetupError("UHP_MEMORY_PROVIDERS names no memory provider")
    return names


def build_providers(
    setting: str, setup_for: Callable[[str], ProviderSetup]
) -> dict[str, MemoryProvider]:
    """The providers UHP_MEMORY_PROVIDERS names, in its order (the first is the default),
    each built from its own setup."""
    built: dict[str, MemoryProvider] = {}
    for name in named_providers(setting):
        built[name] = factory(name).build(setup_for(name))
    return built
