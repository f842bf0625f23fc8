"""Writes of the Memories chapter made with an Idempotency-Key (Memories §5.1, as Tasks says):
a repeat of the same request is given the first one's answer and writes nothing; the same
key with another request is refused; a repeat that arrives while the first still runs waits
for its answer.

A key is claimed before the write runs, in its own transaction, so two requests with one
key at once cannot both write; a write that is refused gives its claim back (nothing
happened, so a corrected repeat may run). What a repeat is given is the first answer as it
was, not the record as it stands now.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from storage import memories as store
from storage.db import Database, Order
from uhp_server.errors import VENDOR, ApiError

POLL_SECONDS = 0.05
WAIT_SECONDS = 30.0  # a repeat waits this long for the first request's answer
STALE_SECONDS = 300.0  # a claim unanswered this long belonged to a request that died


class Replays:
    def __init__(self, db: Database, retention_seconds: float) -> None:
        self.db = db
        self.retention_seconds = retention_seconds

    async def once(
        self,
        principal_id: str,
        key: str,
        fingerprint: str,
        write: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            now = time.time()
            claim = await self.db.write(
                store.claim_replay,
                principal_id,
                key,
                fingerprint,
                now - self.retention_seconds,
                now - STALE_SECONDS,
                order=Order.ANY,
            )
            if claim.claimed:
                return await self._run(principal_id, key, write)
            if claim.fingerprint != fingerprint:
                raise ApiError(
                    409,
                    VENDOR + "idempotency_key_reused",
                    "This Idempotency-Key was already used with a different request.",
                    param="Idempotency-Key",
                )
            if claim.answer is not None:
                return claim.answer
            if time.monotonic() > deadline:
                raise ApiError(
                    409,
                    "memory_busy",
                    "A request with this Idempotency-Key is still running; repeat it later.",
                    param="Idempotency-Key",
                )
            await asyncio.sleep(POLL_SECONDS)

    async def _run(
        self, principal_id: str, key: str, write: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        try:
            answer = await write()
        except BaseException:
            await asyncio.shield(
                self.db.write(store.drop_replay, principal_id, key, order=Order.ANY)
            )
            raise
        await self.db.write(store.settle_replay, principal_id, key, answer, order=Order.ANY)
        return answer

    async def prune(self) -> None:
        await self.db.write(
            store.prune_replays, time.time() - self.retention_seconds, order=Order.ANY
        )
