"""A principal's use of the server, from what it records of each turn: per harness per day
(UTC), the turns and the tokens their final responses report."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from storage import usage
from storage.db import Database
from uhp_server.engine.facade import records

DAY = 86_400


def _tokens(reported: dict[str, Any] | None, name: str) -> int:
    value = (reported or {}).get(name)
    return value if isinstance(value, int) and value >= 0 else 0


class Usage:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def per_day(self, principal_id: str, days: int) -> list[records.UsageDay]:
        """The last `days` days (today included), newest day first, then by harness id."""
        since = (int(time.time()) // DAY - (days - 1)) * DAY
        turns = await self.db.read(usage.turns_since, principal_id, since)
        sums: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
        for created_at, harness_id, reported in turns:
            day = time.strftime("%Y-%m-%d", time.gmtime(created_at))
            entry = sums[(day, harness_id)]
            entry[0] += 1
            entry[1] += _tokens(reported, "input_tokens")
            entry[2] += _tokens(reported, "output_tokens")
        ordered = sorted(sums.items(), key=lambda item: (-_ordinal(item[0][0]), item[0][1]))
        return [records.UsageDay(day, harness, *counts) for (day, harness), counts in ordered]


def _ordinal(day: str) -> int:
    return int(day.replace("-", ""))
