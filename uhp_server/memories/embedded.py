"""The embedded provider: a memory's records in the server's own database (SQLite, or
PostgreSQL when the server runs on it), one row per version (storage/memories.py).

Recall (§6.2): `text` is full-text search over every version's title, text parts and file
parts' text (SQLite FTS5, PostgreSQL text search: storage/memory_search.py); `query` is
meaning, each version's vector from the embedder compared with the question's (sqlite-vec on
SQLite, pgvector on PostgreSQL: memories/meaning.py, storage/memory_vectors.py); `filters` are
conditions over `type`, `attributes.*` and `time.*`; each signal asked is one ranked list,
and the lists are fused by reciprocal rank (`fused`), each hit saying which signals found
it. `query` (meaning) needs an `Embedder` and a `MeaningIndex`: without both it is not in
the signals declared, and a question that asks it is answered `query:not_supported`. With
them, a question whose own vector cannot be had is answered by its other signals with
`query:unavailable`, and one covering versions that have no vector (written while the
embedder failed, or under another model) with `query:records_without_vectors`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from storage import memories as store
from storage import memory_references as references
from storage import memory_search as search
from storage import memory_vectors as vectors
from storage.db import Database, Order
from storage.memory_vectors import Meaning
from storage.tables import MemoryRecordRow
from storage.unit import Tx
from uhp_server.ids import new_id
from uhp_server.memories.meaning import QUERY_PARTIAL, QUERY_UNAVAILABLE, meaning_index, meanings
from uhp_server.memories.provider import (
    AllOf,
    Answer,
    AnyOf,
    Capabilities,
    ContentCapability,
    Embedder,
    EmbeddingsUnavailable,
    Erasure,
    FieldFilter,
    Filter,
    Found,
    HistoryCapability,
    Listing,
    NewRecord,
    ObserveCapability,
    QueriesCapability,
    Question,
    RecallCapability,
    Version,
)
from uhp_server.memories.records import Writer
from uhp_server.memories.registry import ProviderSetup

EMBEDDED = "embedded"
QUERY, TEXT, FILTERS = "query", "text", "filters"
RECALL_LANGUAGE = "uhp.recall"  # a named query's body: a recall template (memory_queries.py)
RRF_K = 60  # reciprocal-rank fusion's constant: a hit's share is 1 / (RRF_K + its rank)
CANDIDATES = 4  # each signal ranks this many times the results asked, at least 50
MIN_CANDIDATES = 50


class MeaningIndex(Protocol):
    """Records nearest in meaning to a vector, among the versions a scope holds: the
    vector index (sqlite-vec, pgvector: memories/meaning.py) that semantic recall needs beside an
    `Embedder`; without one the embedded provider does not declare `query`. Only vectors of
    the question's model are compared with it."""

    async def nearest(
        self, question: Meaning, scope: search.Scope, limit: int
    ) -> list[search.Hit]: ...

    async def without_meaning(self, scope: search.Scope, model: str) -> int:
        """How many versions of the scope have words but no vector of `model`."""
        ...


@dataclass(frozen=True)
class _Ranked:
    signal: str
    hits: list[search.Hit]


# What it keeps of a record's content (§4.3, §7, §10.2 `content`): a file part's reference,
# its bytes staying in the server's file store (`referenced`), for these media types; a
# write naming a file of another type is refused memory_unsupported. Untyped bytes
# (application/octet-stream) are not among them: a memory keeps what it can say what it is.
CONTENT_MEDIA = (
    "text/*",
    "image/*",
    "audio/*",
    "video/*",
    "application/pdf",
    "application/json",
)
CONTENT_BYTES = "referenced"
CONTENT_DESCRIBES: tuple[str, ...] = ()  # it writes no words for a file
GRAPH_ENTITIES = "stated"  # it keeps the entities a writer states and finds none (§10.2)
TYPES = False  # no extension type is registered, so no operations (§8)
CONSOLIDATE = False  # it derives nothing in the background (§9.2)
# Priming (§9.1): the embedded provider marks as always relevant the current records a writer
# stated `attributes.prime: true` on (episodes never), newest first, at most this many.
PRIME_MAX = 20
PRIME_SCAN = 500  # the newest stated records looked among for them


class EmbeddedProvider:
    id = EMBEDDED
    media: tuple[str, ...] = CONTENT_MEDIA

    def __init__(
        self,
        db: Database,
        embedder: Embedder | None = None,
        meaning: MeaningIndex | None = None,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.meaning = meaning

    def turns_sent_to(self) -> str | None:
        """Records stay in the server's database; their text goes out only to be embedded."""
        return self.embedder.destination if self.embedder is not None else None

    def signals(self) -> tuple[str, ...]:
        by_meaning = self.embedder is not None and self.meaning is not None
        return (QUERY, TEXT, FILTERS) if by_meaning else (TEXT, FILTERS)

    def capabilities(self) -> Capabilities:
        return Capabilities(
            id=self.id,
            # One table for every memory: each read and write carries the memory ids the
            # server decided, a condition the provider applies (§3.3).
            isolation="enforced_filter",
            derivation="none",
            observe=ObserveCapability(keeps_episodes=True, answers="records"),
            recall=RecallCapability(signals=self.signals(), abstain=True),
            history=HistoryCapability(content="versions", structure="versions"),
            revise="native",
            forget="native",
            erase_unreachable="reported",  # it keeps no copy: an empty list is a guarantee
            prime=True,  # attributes.prime: true (PRIME_MAX newest)
            consolidate=CONSOLIDATE,
            queries=QueriesCapability(named=True, languages=(RECALL_LANGUAGE,), free=None),
            types=TYPES,
            graph_entities=GRAPH_ENTITIES,
            content=ContentCapability(
                media=CONTENT_MEDIA, bytes=CONTENT_BYTES, describes=CONTENT_DESCRIBES
            ),
        )

    async def remember(self, records: list[NewRecord]) -> list[Version] | None:
        now = store.now_ms()
        rows = [_row(new_id("memory_record"), 1, record, now) for record in records]
        stored = await self.db.write(_insert, rows, await self._meanings(rows), order=Order.ANY)
        return None if stored is None else [_version(row) for row in stored]

    async def append(self, record_id: str, after: int, record: NewRecord) -> Version | None:
        row = _row(record_id, after + 1, record, store.now_ms())
        row.supersedes = after
        meaning = (await self._meanings([row]))[0]
        stored = await self.db.write(_append, row, meaning, order=Order.ANY)
        return None if stored is None else _version(stored)

    async def _meanings(self, rows: list[MemoryRecordRow]) -> list[Meaning | None]:
        """The versions' vectors, when recall by meaning is served (None each, else)."""
        if self.embedder is None or self.meaning is None:
            return [None] * len(rows)
        return await meanings(self.embedder, [row.search_text or "" for row in rows])

    async def forget(self, memory_id: str, record_id: str) -> Version | None:
        row = await self.db.write(store.forget_record, memory_id, record_id, order=Order.ANY)
        return None if row is None else _version(row)

    async def get(self, memory_id: str, record_id: str, as_of: int | None) -> Version | None:
        if as_of is None:
            row = await self.db.read(store.current_record, memory_id, record_id)
        else:
            row = await self.db.read(store.record_as_of, memory_id, record_id, as_of)
        return None if row is None else _version(row)

    async def history(self, memory_id: str, record_id: str) -> list[Version]:
        rows = await self.db.read(store.record_versions, memory_id, record_id)
        return [_version(row) for row in rows]

    async def listing(self, listing: Listing) -> list[Version]:
        query = store.RecordQuery(
            memory_id=listing.memory_id,
            type=listing.type,
            include_forgotten=listing.include_forgotten,
            as_of=listing.as_of,
            after=listing.after,
            limit=listing.limit,
        )
        return [_version(row) for row in await self.db.read(store.list_records, query)]

    async def counts(self, memory_ids: Iterable[str]) -> dict[str, int]:
        return await self.db.read(store.record_counts, list(memory_ids))

    async def locate(self, record_ids: Iterable[str]) -> dict[str, str]:
        rows = await self.db.read(store.records_by_ids, list(record_ids))
        return {record_id: row.memory_id for record_id, row in rows.items()}

    async def erase(self, memory_id: str, record_ids: list[str]) -> Erasure | None:
        # It derives nothing and keeps no copy: its versions are all there is to remove.
        erased = await self.db.write(_erase, memory_id, record_ids, order=Order.ANY)
        return None if erased is None else Erasure(erased, [])

    async def drop(self, memory_ids: list[str]) -> None:
        await self.db.write(_drop, memory_ids, order=Order.ANY)

    async def prime(self, memory_id: str) -> list[Version]:
        rows = await self.db.read(store.newest_stated, memory_id, PRIME_SCAN)
        marked = [row for row in rows if (row.attributes or {}).get("prime") is True]
        return [_version(row) for row in marked[:PRIME_MAX]]

    async def recall(self, question: Question) -> Answer:
        scope = search.Scope(
            memory_ids=question.memory_ids,
            types=question.types,
            as_of=question.as_of,
            include_forgotten=question.include_forgotten,
        )
        depth = max(MIN_CANDIDATES, question.limit * CANDIDATES)
        degraded: list[str] = []
        lists: list[_Ranked] = []
        if question.query is not None:
            if self.embedder is None or self.meaning is None:
                degraded.append("query:not_supported")
            else:
                ranked_by_meaning = await self._by_meaning(question.query, scope, depth)
                degraded += ranked_by_meaning.degraded
                if ranked_by_meaning.hits is not None:
                    lists.append(_Ranked(QUERY, ranked_by_meaning.hits))
        if question.text is not None:
            hits = await self.db.read(search.by_text, scope, question.text, depth)
            lists.append(_Ranked(TEXT, hits))
        if question.filters:
            conditions = [_condition(f) for f in question.filters]
            hits = await self.db.read(search.by_fields, scope, conditions, depth)
            lists.append(_Ranked(FILTERS, hits))
        ranked = fused(lists)[: question.limit]
        rows = await self.db.read(search.versions, [hit for hit, _, _ in ranked])
        found = [
            Found(_version(rows[hit]), score, why) for hit, score, why in ranked if hit in rows
        ]
        return Answer(found, degraded, _abstains(question, found))

    async def _by_meaning(self, query: str, scope: search.Scope, depth: int) -> _ByMeaning:
        assert self.embedder is not None and self.meaning is not None
        try:
            vector = (await self.embedder.embed([query]))[0]
        except EmbeddingsUnavailable:
            return _ByMeaning(None, [QUERY_UNAVAILABLE])
        model = self.embedder.model
        hits = await self.meaning.nearest(Meaning(model, vector), scope, depth)
        missing = await self.meaning.without_meaning(scope, model)
        return _ByMeaning(hits, [QUERY_PARTIAL] if missing else [])

    async def referrers(
        self, memory_ids: Iterable[str], record_ids: Iterable[str]
    ) -> list[Version]:
        rows = await self.db.read(references.referrers, list(memory_ids), list(record_ids))
        return [_version(row) for row in rows]


@dataclass(frozen=True)
class _ByMeaning:
    hits: list[search.Hit] | None  # None: not asked (the question has no vector)
    degraded: list[str]


# Each write keeps the index of references by target, and the versions' vectors, in the same
# transaction; an erasure removes both with the versions (no copy of an erased record stays).
def _insert(
    tx: Tx, rows: list[MemoryRecordRow], meanings: list[Meaning | None]
) -> list[MemoryRecordRow] | None:
    stored = store.insert_record(tx, rows)
    if stored is not None:
        references.index_versions(tx, stored)
        vectors.index_versions(tx, stored, meanings)
    return stored


def _append(tx: Tx, row: MemoryRecordRow, meaning: Meaning | None) -> MemoryRecordRow | None:
    stored = store.append_version(tx, row)
    if stored is not None:
        references.index_versions(tx, [stored])
        vectors.index_versions(tx, [stored], [meaning])
    return stored


def _erase(tx: Tx, memory_id: str, record_ids: list[str]) -> list[str] | None:
    erased = store.erase_records(tx, memory_id, record_ids)
    if erased is not None:
        references.unindex_records(tx, erased)
        vectors.unindex_records(tx, erased)
    return erased


def _drop(tx: Tx, memory_ids: list[str]) -> None:
    store.delete_records(tx, memory_ids)
    references.unindex_memories(tx, memory_ids)
    vectors.unindex_memories(tx, memory_ids)


def _row(record_id: str, version: int, record: NewRecord, now: int) -> MemoryRecordRow:
    return MemoryRecordRow(
        id=record_id,
        version=version,
        memory_id=record.memory_id,
        type=record.type,
        title=record.title,
        content=record.content,
        attributes=record.attributes,
        refs=record.references,
        status=store.ACTIVE,
        supersedes=None,
        valid_from=record.valid_from,
        valid_to=record.valid_to,
        written_at_ms=now,
        written_by=record.written_by.to_json(),
        search_text=search.searchable(record.title, record.content),
    )


def _version(row: MemoryRecordRow) -> Version:
    writer = row.written_by or {}
    return Version(
        id=row.id,
        memory_id=row.memory_id,
        version=row.version,
        status=row.status,
        supersedes=row.supersedes,
        written_at_ms=row.written_at_ms,
        invalidated_at_ms=row.invalidated_at_ms,
        follows=row.follows,
        record=NewRecord(
            memory_id=row.memory_id,
            type=row.type,
            title=row.title,
            content=list(row.content or []),
            attributes=dict(row.attributes or {}),
            references=list(row.refs or []),
            valid_from=row.valid_from,
            valid_to=row.valid_to,
            written_by=Writer(
                kind=str(writer.get("kind", "")),
                id=str(writer.get("id", "")),
                type=writer.get("type"),
            ),
        ),
    )


def fused(lists: Sequence[_Ranked]) -> list[tuple[search.Hit, float, tuple[str, ...]]]:
    """Reciprocal-rank fusion: each list gives a hit 1 / (RRF_K + rank); the sum, scaled so
    that first in every list asked is 1.0, ranks the hits, and `why` names the lists that
    held each."""
    if not lists:
        return []
    best = len(lists) / (RRF_K + 1)
    scores: dict[search.Hit, float] = {}
    why: dict[search.Hit, list[str]] = {}
    for ranked in lists:
        for rank, hit in enumerate(ranked.hits, start=1):
            scores[hit] = scores.get(hit, 0.0) + 1 / (RRF_K + rank)
            why.setdefault(hit, []).append(ranked.signal)
    order = sorted(scores, key=lambda hit: -scores[hit])
    return [(hit, round(scores[hit] / best, 4), tuple(why[hit])) for hit in order]


def _abstains(question: Question, found: list[Found]) -> bool:
    """Nothing found answers the question: when it asked by meaning or by words, no hit came
    from either (a hit by fields alone does not answer a question); else, nothing found."""
    asked = {QUERY} if question.query is not None else set()
    if question.text is not None:
        asked.add(TEXT)
    if asked:
        return not any(asked & set(hit.why) for hit in found)
    return not found


def _condition(given: Filter) -> search.Filter:
    if isinstance(given, FieldFilter):
        return search.Condition(given.field, given.op, given.value)
    if isinstance(given, AllOf):
        return search.AllOf(tuple(_condition(c) for c in given.conditions))
    assert isinstance(given, AnyOf)
    return search.AnyOf(tuple(_condition(c) for c in given.conditions))


class EmbeddedFactory:
    """Its entry point in `uhp_server.memory_providers` (memories/registry.py)."""

    name = EMBEDDED

    def build(self, setup: ProviderSetup) -> EmbeddedProvider:
        # Recall by meaning when an embedder is configured and the database can rank vectors.
        meaning = meaning_index(setup.db) if setup.embedder is not None else None
        return EmbeddedProvider(setup.db, setup.embedder, meaning)


FACTORY = EmbeddedFactory()
