"""A share per principal on a replica of a shared database: a turn first waits until its
principal has fewer than its share of turns in flight on this replica (running, or waiting
for a slot of the cluster), then takes a slot of the shared admission
(engine/replicas/shared_admission.py: the limit over every replica, in arrival order).

What holds, then: no principal holds more than its share on a replica, so on a lone replica
one principal's flood always leaves a slot to another, whose task starts at once, as in one
process. Between the turns that passed their share the cluster's line keeps arrival order,
whoever's they are: with a flood, another principal's task waits behind at most the flood's
share on each replica, not behind all of it. Round-robin between principals and the place in
line of a turn held back by its share (engine/turns/admission.py) are one process's only.
A turn held back by its share is marked queued for the other replicas to read, as one in
its replica's own queue is. With a share as large as the limit there is nothing to hold back:
turns go straight to the shared admission.
"""

from __future__ import annotations

import sys

from uhp_server.engine.replicas.shared_admission import SharedAdmission
from uhp_server.engine.turns.admission import AdmissionQueue


class FairSharedAdmission:
    def __init__(self, shared: SharedAdmission, share: int) -> None:
        self.shared = shared
        # Turns in flight per principal, as many principals as come (the limit is the cluster's).
        self.shares = AdmissionQueue(sys.maxsize, share) if share < shared.limit else None

    async def acquire(self, holder: str, principal: str) -> None:
        """Its principal's share, then the cluster's slot. Cancelling either wait leaves
        both (a place in the share already taken is given back)."""
        if self.shares is not None:
            self.shared.waiting_before_line(holder)
            try:
                await self.shares.acquire(holder, principal)
            finally:
                self.shared.done_waiting_before_line(holder)
        try:
            await self.shared.acquire(holder, principal)
        except BaseException:
            self._share_back(holder)
            raise

    def release(self, holder: str) -> None:
        self.shared.release(holder)
        self._share_back(holder)

    def position(self, holder: str) -> int | None:
        """Its place in this replica's own queue of the shared admission (None while held back
        by its share, or in the cluster's line: its place there is the database's)."""
        return self.shared.position(holder)

    def _share_back(self, holder: str) -> None:
        if self.shares is not None:
            self.shares.release(holder)
