"""The mem0 memory provider (https://github.com/mem0ai/mem0, `pip install '.[mem0]'`), in its
local mode: registered as `mem0` in the `uhp_server.memory_providers` entry points and
connected by UHP_MEMORY_PROVIDERS (docs/memory-providers.md).

- provider.py: the seam's operations over mem0, and its capability document.
- payloads.py: a version of a record as one mem0 memory (text, metadata).
- store.py: mem0's `Memory` (Qdrant embedded on disk, history in SQLite), on a worker thread.
"""

from __future__ import annotations

import logging

from uhp_server.memories.mem0.provider import CAPABILITIES, MEM0, Mem0Provider
from uhp_server.memories.registry import ProviderSetup, ProviderSetupError

log = logging.getLogger(__name__)


class Mem0Factory:
    name = MEM0

    def build(self, setup: ProviderSetup) -> Mem0Provider:
        if setup.embedder is None:
            raise ProviderSetupError(
                "memory provider mem0 keeps records by their vectors: set "
                "UHP_MEMORY_EMBEDDING_MODEL to an embedding model of the configured provider"
            )
        try:
            from uhp_server.memories.mem0.store import import_mem0

            import_mem0(setup.folder / "home")
        except ImportError as exc:
            raise ProviderSetupError(
                f"memory provider mem0 needs the mem0ai package: pip install 'uhp-server[mem0]' "
                f"({exc})"
            ) from exc
        if setup.db.dialect.shared:
            # Replicas each have a data dir: a record one keeps in its mem0 folder, another
            # cannot read. One replica on PostgreSQL is fine.
            log.warning(
                "mem0_local_mode_per_replica",
                extra={"hint": "mem0 keeps records in this replica's data dir: run one replica"},
            )
        return Mem0Provider(setup.embedder, setup.folder)


FACTORY = Mem0Factory()

__all__ = ["CAPABILITIES", "FACTORY", "MEM0", "Mem0Provider"]
