"""Old versions garbage-collected when nothing reads them (docs/environments.md, Retention).

The rule: a version's folder is kept while it is the active version, while a live session
reads it (storage/environments.versions_in_use), while it is building, and while it is one
of the newest `keep_ready` ready versions (a rollback needs no rebuild); every other folder
goes, failed builds' included. The record stays, with `collected_at`: its log, packages and
times are still read back, and it cannot be activated again. The rule is applied after each
build and, for every environment, at start-up.

Which versions go is chosen on a reader, then marked in a write that checks again what is in
use (a session may have started on one meanwhile); only the marked ones' folders go.
"""

from __future__ import annotations

import asyncio
import logging

from storage import environments as store
from storage.db import Database, Order
from storage.tables import EnvironmentVersionRow
from storage.unit import Tx
from uhp_server.environments.folders import remove_folder
from uhp_server.environments.layout import EnvironmentLayout

log = logging.getLogger(__name__)


def collectable(
    versions: list[EnvironmentVersionRow], in_use: set[int], keep_ready: int
) -> list[int]:
    """The versions whose folders may go under the rule above (oldest first)."""
    ready = [row.version for row in versions if row.status == store.READY]
    newest = set(sorted(ready)[-keep_ready:]) if keep_ready > 0 else set()
    return [
        row.version
        for row in versions
        if row.status != store.BUILDING and row.version not in in_use and row.version not in newest
    ]


class Retention:
    def __init__(self, db: Database, layout: EnvironmentLayout, keep_ready: int) -> None:
        self.db = db
        self.layout = layout
        self.keep_ready = keep_ready

    async def sweep(self, environment_id: str) -> list[int]:
        """Applies the rule to one environment; the versions whose folders went."""
        versions, in_use = await self.db.read(self._state, environment_id)
        candidates = collectable(versions, in_use, self.keep_ready)
        on_disk = [v for v in candidates if self.layout.version(environment_id, v).exists()]
        if not on_disk:
            return []
        marked = await self.db.write(store.collect, environment_id, on_disk, order=Order.ANY)
        for version in marked:
            await asyncio.to_thread(remove_folder, self.layout.version(environment_id, version))
        if marked:
            log.info(
                "environment_versions_collected",
                extra={"environment": environment_id, "versions": marked},
            )
        return marked

    async def sweep_all(self) -> None:
        for environment_id in await self.db.read(store.environment_ids):
            await self.sweep(environment_id)

    @staticmethod
    def _state(tx: Tx, environment_id: str) -> tuple[list[EnvironmentVersionRow], set[int]]:
        return store.versions(tx, environment_id), store.versions_in_use(tx, environment_id)
