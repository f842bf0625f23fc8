"""Recall by meaning for the embedded provider: the vectors its versions are given when
written, and the index that finds the versions nearest to a question's
(storage/memory_vectors.py: sqlite-vec on SQLite, pgvector on PostgreSQL).

A write never waits on meaning to be kept: when the embedder gives no vectors (the model
provider unreachable, the model unknown), the versions are kept without one, and recall by
meaning says in `degraded` that some versions it covers have none.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from storage import memory_search as search
from storage import memory_vectors as vectors
from storage.db import Database
from storage.memory_vectors import Meaning
from uhp_server.memories.provider import Embedder, EmbeddingsUnavailable

log = logging.getLogger(__name__)

# What recall says in `degraded` of meaning (§6.2): the question itself could not be embedded,
# or some versions it covers have no vector (they were looked for by the other signals only).
QUERY_UNAVAILABLE = "query:unavailable"
QUERY_PARTIAL = "query:records_without_vectors"


class StoredVectors:
    """`MeaningIndex` over the vectors kept beside the versions, in the server's database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def nearest(self, question: Meaning, scope: search.Scope, limit: int) -> list[search.Hit]:
        return await self.db.read(vectors.nearest, scope, question, limit)

    async def without_meaning(self, scope: search.Scope, model: str) -> int:
        return await self.db.read(vectors.without_meaning, scope, model)


def meaning_index(db: Database) -> StoredVectors | None:
    """The index for this database, or None (logged, with why) when it cannot rank by
    meaning: then the provider does not declare `query`."""
    why_not = db.run(vectors.searchable_by_meaning)
    if why_not is not None:
        log.warning("memory_query_not_declared", extra={"reason": why_not})
        return None
    return StoredVectors(db)


async def meanings(embedder: Embedder, texts: Sequence[str]) -> list[Meaning | None]:
    """Each text's vector from the embedder, None for a text without words; all None when the
    embedder gives none (the write goes on without them)."""
    wanted = [i for i, text in enumerate(texts) if text.strip()]
    found: list[Meaning | None] = [None] * len(texts)
    if not wanted:
        return found
    try:
        given = await embedder.embed([texts[i] for i in wanted])
    except EmbeddingsUnavailable as exc:
        log.warning("memory_write_without_vectors", extra={"reason": str(exc)})
        return found
    for i, vector in zip(wanted, given, strict=True):
        found[i] = Meaning(embedder.model, vector)
    return found
