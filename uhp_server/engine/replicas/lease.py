"""This replica's lease among the replicas of one PostgreSQL database (engine/replicas/cluster.py
renews it): whether the others still count what this one holds."""

from __future__ import annotations

import time


class Lease:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds  # UHP_REPLICA_LEASE_SECONDS
        self._renewed = 0.0  # when the last renewal that landed set out (monotonic)

    def renewed(self, setting_out: float) -> None:
        """A renewal that set out at `setting_out` (monotonic) landed: the lease runs from no
        later than that."""
        self._renewed = max(self._renewed, setting_out)

    def current(self) -> bool:
        """Whether the last renewal that landed set out less than a lease ago: while it is
        not, the other replicas may no longer count what this one holds."""
        return self.age() < self.seconds

    def age(self) -> float:
        """Seconds since the last renewal that landed set out."""
        return time.monotonic() - self._renewed
