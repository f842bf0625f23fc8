"""The mem0 provider: a memory's records kept by mem0 (local mode), embedded through the gateway.

Each version of a record is one mem0 memory whose `user_id` is the memory's id (payloads.py).
mem0 keeps every memory in one collection and tells them apart by that filter, so the
isolation is `enforced_filter`: every read and write names the memory, and every version
fetched is checked to be of the memory asked before it is answered (`_of`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from storage.memories import now_ms
from uhp_server.errors import ApiError
from uhp_server.ids import new_id
from uhp_server.memories.mem0 import filters
from uhp_server.memories.mem0 import payloads as p
from uhp_server.memories.mem0.store import SCAN_LIMIT, Mem0Store
from uhp_server.memories.provider import (
    Answer,
    Capabilities,
    ContentCapability,
    Embedder,
    EmbeddingsUnavailable,
    Erasure,
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

MEM0 = "mem0"
# Below this similarity (cosine, 0..1) nothing found is taken to answer the question.
ABSTAIN_BELOW = 0.2
# Priming (§9.1): the current records a writer stated `attributes.prime: true` on (episodes
# never), newest first, at most this many; as the embedded provider does.
PRIME_MAX = 20

CAPABILITIES = Capabilities(
    id=MEM0,
    isolation="enforced_filter",  # one collection; the memory is a filter on every call
    derivation="none",  # every write is mem0's add(infer=False): kept as stated
    observe=ObserveCapability(keeps_episodes=True, answers="records"),
    recall=RecallCapability(signals=("query", "filters"), abstain=True),
    history=HistoryCapability(content="versions", structure="versions"),
    revise="emulated",  # a new mem0 memory per version; mem0's update would overwrite
    forget="emulated",  # the version closed in its payload; mem0's delete would remove it
    erase_unreachable="reported",  # mem0's own history of a record is purged and checked
    prime=True,  # records stated with attributes.prime: true, found by mem0's filter
    consolidate=False,
    queries=QueriesCapability(named=False, languages=(), free=None),
    types=False,
    graph_entities="stated",  # mem0's entity store is filled by its LLM, which is not used
    content=ContentCapability(media=(), bytes="referenced", describes=()),  # no file parts
)

T = TypeVar("T")


class Mem0Unavailable(ApiError):
    def __init__(self, why: str) -> None:
        message = f"The memory provider mem0 is unavailable: {why}."
        super().__init__(503, "memory_unavailable", message)


class Mem0Provider:
    id = MEM0
    # The media types a file part may carry (§10.2 content.media): none, the adapter keeps
    # records' text and structured parts only; the server refuses a file part.
    media: tuple[str, ...] = ()

    def __init__(self, embedder: Embedder, folder: Path) -> None:
        self.embedder = embedder
        self.folder = folder
        self._store: Mem0Store | None = None
        # One call into mem0 at a time: Qdrant's local mode is not made for concurrent
        # callers, and a revision's check-then-write must not interleave with another's.
        self._lock = asyncio.Lock()

    def turns_sent_to(self) -> str | None:
        """mem0 keeps its records in a folder of the server (local mode); every record's text
        goes to the embedding model."""
        return self.embedder.destination

    def capabilities(self) -> Capabilities:
        """Its capability document (§10.2): the same whatever is configured, since mem0 is
        not built without an embedder (`query` is always there)."""
        return CAPABILITIES

    # -- writes ---------------------------------------------------------------------------
    async def remember(self, records: list[NewRecord]) -> list[Version] | None:
        vectors = await self._embed([p.text_of(r) for r in records])
        written = []
        async with self._lock:
            store = await self._opened()
            now = now_ms()
            for record, vector in zip(records, vectors, strict=True):
                metadata = p.metadata_of(new_id("memory_record"), 1, record, now, None)
                await _call(store.add, p.text_of(record), vector, record.memory_id, metadata)
                written.append(p.version_of({**metadata, p.MEMORY: record.memory_id}))
        return written

    async def append(self, record_id: str, after: int, record: NewRecord) -> Version | None:
        [vector] = await self._embed([p.text_of(record)])
        async with self._lock:
            store = await self._opened()
            points = await self._points(store, record.memory_id, record_id)
            current = next((pt for pt in points if pt[1][p.VERSION] == after), None)
            if current is None or current[1][p.STATUS] != "active":
                return None  # another change came first
            now = max(now_ms(), int(current[1][p.WRITTEN_AT]) + 1)
            closed = {p.STATUS: "superseded", p.INVALIDATED_AT: now}
            await _call(store.set_fields, current[0], closed)
            metadata = p.metadata_of(record_id, after + 1, record, now, after)
            await _call(store.add, p.text_of(record), vector, record.memory_id, metadata)
        return p.version_of({**metadata, p.MEMORY: record.memory_id})

    async def forget(self, memory_id: str, record_id: str) -> Version | None:
        async with self._lock:
            store = await self._opened()
            newest = _newest(await self._points(store, memory_id, record_id))
            if newest is None or newest[1][p.STATUS] != "active":
                return None if newest is None else p.version_of(newest[1])
            fields = {p.STATUS: "forgotten", p.INVALIDATED_AT: now_ms()}
            await _call(store.set_fields, newest[0], fields)
            return p.version_of({**newest[1], **fields})

    async def erase(self, memory_id: str, record_ids: list[str]) -> Erasure | None:
        async with self._lock:
            store = await self._opened()
            wanted = {p.MEMORY: memory_id, p.RECORD: {"in": list(record_ids)}}
            points = [pt for pt in await _call(store.scan, wanted) if self._of(pt, memory_id)]
            if {pt[1][p.RECORD] for pt in points} != set(record_ids):
                return None
            ids = [pt[0] for pt in points]
            await _call(store.delete, ids)
            # mem0 keeps a deleted memory's text in its history: purged, and checked gone,
            # so that the empty `unreachable` below is a guarantee (§5.2).
            left = await _call(store.history_rows, ids)
        unreachable = [] if left == 0 else list(record_ids)
        return Erasure(list(record_ids), unreachable)

    async def drop(self, memory_ids: list[str]) -> None:
        if not memory_ids:
            return
        async with self._lock:
            store = await self._opened()
            points = await _call(store.scan, {p.MEMORY: {"in": list(memory_ids)}})
            await _call(store.delete, [pt[0] for pt in points])

    # -- reads ----------------------------------------------------------------------------
    async def get(self, memory_id: str, record_id: str, as_of: int | None) -> Version | None:
        async with self._lock:
            points = await self._points(await self._opened(), memory_id, record_id)
        if as_of is None:
            newest = _newest(points)
            return None if newest is None else p.version_of(newest[1])
        held = [pt for pt in points if p.held_at(pt[1], as_of)]
        return p.version_of(held[0][1]) if held else None

    async def history(self, memory_id: str, record_id: str) -> list[Version]:
        async with self._lock:
            points = await self._points(await self._opened(), memory_id, record_id)
        return sorted((p.version_of(pt[1]) for pt in points), key=lambda v: v.version)

    async def listing(self, listing: Listing) -> list[Version]:
        wanted: dict[str, Any] = {p.MEMORY: listing.memory_id}
        if listing.type is not None:
            wanted[p.TYPE] = listing.type
        async with self._lock:
            points = await _call((await self._opened()).scan, wanted)
        kept = [pt[1] for pt in points if self._of(pt, listing.memory_id)]
        if listing.as_of is not None:
            kept = [payload for payload in kept if p.held_at(payload, listing.as_of)]
        else:
            kept = [payload for payload in kept if p.is_current(payload, listing.include_forgotten)]
        if listing.after is not None:
            kept = [payload for payload in kept if payload[p.RECORD] > listing.after]
        kept.sort(key=lambda payload: payload[p.RECORD])
        return [p.version_of(payload) for payload in kept[: listing.limit]]

    async def counts(self, memory_ids: Iterable[str]) -> dict[str, int]:
        ids = list(memory_ids)
        if not ids:
            return {}
        async with self._lock:
            wanted = {p.MEMORY: {"in": ids}, p.STATUS: "active"}
            points = await _call((await self._opened()).scan, wanted)
        counted: dict[str, int] = {}
        for _, payload in points:
            counted[payload[p.MEMORY]] = counted.get(payload[p.MEMORY], 0) + 1
        return counted

    async def locate(self, record_ids: Iterable[str]) -> dict[str, str]:
        ids = list(set(record_ids))
        if not ids:
            return {}
        async with self._lock:
            points = await _call((await self._opened()).scan, {p.RECORD: {"in": ids}})
        return {payload[p.RECORD]: payload[p.MEMORY] for _, payload in points}

    async def prime(self, memory_id: str) -> list[Version]:
        wanted = {
            p.MEMORY: memory_id,
            p.STATUS: "active",
            f"{p.BODY}.attributes.prime": True,
            p.TYPE: {"ne": "episode"},
        }
        async with self._lock:
            points = await _call((await self._opened()).scan, wanted)
        marked = [pt[1] for pt in points if self._of(pt, memory_id)]
        marked.sort(key=lambda payload: (-int(payload[p.WRITTEN_AT]), payload[p.RECORD]))
        return [p.version_of(payload) for payload in marked[:PRIME_MAX]]

    async def referrers(
        self, memory_ids: Iterable[str], record_ids: Iterable[str]
    ) -> list[Version]:
        """Reference targets sit inside the record as written, where mem0 cannot filter:
        the memories' current records are read and their references matched here."""
        targets = set(record_ids)
        found = []
        for memory_id in memory_ids:
            for version in await self.listing(Listing(memory_id, limit=SCAN_LIMIT)):
                if any(ref.get("record_id") in targets for ref in version.record.references):
                    found.append(version)
        return found

    async def recall(self, question: Question) -> Answer:
        """`query` by mem0's vector search and `filters` (over type and attributes) by its
        filters, both applied by Qdrant within each memory; `text` is not offered."""
        fields = filters.conditions(question.filters)
        degraded = ["text:not_supported"] if question.text is not None else []
        if question.filters and fields is None:
            degraded.append("filters:not_supported")
        fields = fields or []
        if question.query is None and not fields:
            return Answer([], degraded, abstain=True)
        found = await (
            self._by_meaning(question, fields)
            if question.query
            else self._by_fields(question, fields)
        )
        found = found[: question.limit]
        abstain = not found or found[0].score < ABSTAIN_BELOW
        return Answer(found, degraded, abstain)

    async def _by_meaning(self, question: Question, fields: list[dict[str, Any]]) -> list[Found]:
        assert question.query is not None
        [vector] = await self._embed([question.query])
        why = ("query", "filters") if fields else ("query",)
        found: list[Found] = []
        async with self._lock:
            store = await self._opened()
            for memory_id in question.memory_ids:
                scope, pool = _scope(question, memory_id, fields), _pool(question)
                for hit in await _call(store.search, question.query, vector, scope, pool):
                    payload = {**(hit.get("metadata") or {}), p.MEMORY: hit.get(p.MEMORY)}
                    score = min(1.0, float(hit.get("score") or 0.0))
                    if score <= 0:
                        continue  # nothing in common with the question: not found by meaning
                    if (one := _found(payload, memory_id, question, score, why)) is not None:
                        found.append(one)
        return sorted(found, key=lambda f: f.score, reverse=True)

    async def _by_fields(self, question: Question, fields: list[dict[str, Any]]) -> list[Found]:
        """Filters alone: every version that matches holds, equally (score 1), by record id."""
        found: list[Found] = []
        async with self._lock:
            store = await self._opened()
            for memory_id in question.memory_ids:
                for _, payload in await _call(store.scan, _scope(question, memory_id, fields)):
                    if (one := _found(payload, memory_id, question, 1.0, ("filters",))) is not None:
                        found.append(one)
        return sorted(found, key=lambda f: (f.version.memory_id, f.version.id))

    # -- mem0, opened on first use ------------------------------------------------------
    async def _opened(self) -> Mem0Store:
        """The store; opened under the lock on first use, since its collection's width is
        the embedding model's, learnt from one embedding."""
        if self._store is None:
            [probe] = await self._embed(["dimensions"])
            self._store = await _call(Mem0Store, self.folder, len(probe), self.embedder.model)
        return self._store

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        try:
            return await self.embedder.embed(texts)
        except EmbeddingsUnavailable as exc:
            raise Mem0Unavailable(str(exc)) from exc

    async def _points(
        self, store: Mem0Store, memory_id: str, record_id: str
    ) -> list[tuple[str, dict[str, Any]]]:
        points = await _call(store.scan, {p.MEMORY: memory_id, p.RECORD: record_id})
        return [pt for pt in points if self._of(pt, memory_id)]

    @staticmethod
    def _of(point: tuple[str, dict[str, Any]], memory_id: str) -> bool:
        """The identity check of `enforced_filter` (§10.3): a version is answered only
        through the memory it is in, whatever the filter let through."""
        return point[1].get(p.MEMORY) == memory_id

    async def aclose(self) -> None:
        async with self._lock:
            if self._store is not None:
                await _call(self._store.close)
                self._store = None


async def _call(function: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(functools.partial(function, *args))


def _newest(points: list[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]] | None:
    return max(points, key=lambda pt: pt[1][p.VERSION], default=None)


def _scope(question: Question, memory_id: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    """mem0's filter for one memory's versions a question may find."""
    scope: dict[str, Any] = {p.MEMORY: memory_id}
    if question.as_of is None:
        current = ["active", "forgotten"] if question.include_forgotten else ["active"]
        scope[p.STATUS] = {"in": current}
    else:
        scope[p.WRITTEN_AT] = {"lte": question.as_of}  # and not closed by then: _found
    if question.types:
        scope[p.TYPE] = {"in": list(question.types)}
    if fields:
        scope["AND"] = fields
    return scope


def _pool(question: Question) -> int:
    """How many to ask mem0 for: more than the limit when `as_of` drops closed versions."""
    return question.limit if question.as_of is None else question.limit * 4


def _found(
    payload: dict[str, Any], memory_id: str, question: Question, score: float, why: tuple[str, ...]
) -> Found | None:
    """A hit as a result, once checked to be of the memory searched and held at `as_of`."""
    if payload.get(p.MEMORY) != memory_id or p.RECORD not in payload:
        return None
    if question.as_of is not None and not p.held_at(payload, question.as_of):
        return None
    return Found(p.version_of(payload), score, why)
