"""The graph read (Memories §6.6), built by the server from what every provider has: records,
their references, and the records that reference a record (`referrers`).

The walk starts at one record (`around`) or at every record of the memory and what is below
it that the caller may read (the scope a search has, `Access.searched`), and goes `hops`
references away in both directions: out along a node's own references into any memory the
caller may read, and in from the records of the scope that name a node. A provider is only
ever asked about memories the caller may read. An edge into what the caller may not read is
kept, marked unavailable, and leads to no node.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from storage import memories as store
from storage.db import Database
from uhp_server.errors import ApiError
from uhp_server.memories.access import READ, Access
from uhp_server.memories.errors import record_not_found
from uhp_server.memories.graph import (
    GraphEdge,
    GraphEnd,
    GraphNode,
    GraphRequest,
    MemoryGraph,
)
from uhp_server.memories.provider import Listing, MemoryProvider, Version
from uhp_server.memories.records import MemoryRecord

# The most records one walk visits, whatever the limit: past it the walk stops and says so.
MAX_VISITED = 5000
PAGE = 200
WALK_CAPPED = f"graph:walk_capped_at_{MAX_VISITED}_records"
INCOMING_UNSUPPORTED = "edges_in:not_supported"


@dataclass
class GraphWalk:
    """One caller's walk: its access, each memory's provider, and how a record is shown to
    it (references resolved for this reader)."""

    db: Database
    access: Access
    provider_names: dict[str, str]  # by memory
    providers: dict[str, MemoryProvider]
    shown: Callable[[Version], Awaitable[MemoryRecord]]
    # Reads memories (with their ancestors) into `access`: where a reference leads is
    # decided once it is read.
    reach: Callable[[Iterable[str]], Awaitable[None]]
    visited: dict[str, Version] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    capped: bool = False

    async def graph(self, scope: list[str], ask: GraphRequest) -> MemoryGraph:
        """The walk over `scope`: the memory asked and what below it the caller may read
        (memory_recall.scope)."""
        if ask.around is not None:
            frontier = [await self._start(scope, ask.around)]
        else:
            frontier = await self._every_record(scope)
        # Started from every record of the scope, every record that names one is already
        # visited: only the references leading out of it are left to follow.
        whole_scope = ask.around is None and not self.capped
        self._visit(frontier)
        for _ in range(ask.hops):
            if not frontier or self.capped:
                break
            incoming = [] if whole_scope else await self._incoming(scope, frontier)
            frontier = self._visit([*(await self._outgoing(frontier)), *incoming])
        if self.capped:
            self.degraded.append(WALK_CAPPED)
        kept = [v for v in self.visited.values() if ask.types is None or v.record.type in ask.types]
        nodes = kept[: ask.limit]
        await self.reach(_targets(nodes))
        return MemoryGraph(
            nodes=await self._nodes(nodes),
            edges=self._edges(nodes),
            truncated=len(kept) > ask.limit or self.capped,
            degraded=self.degraded,
        )

    # -- where it starts --------------------------------------------------------------------
    async def _start(self, scope: list[str], record_id: str) -> Version:
        """The record `around`, when it is a current record of the scope; a record of a
        memory outside it is not found, as through any memory it is not in."""
        in_scope = set(scope)
        for name in {self.provider_names[m] for m in scope} & set(self.providers):
            where = (await self.providers[name].locate([record_id])).get(record_id)
            if where in in_scope:
                version = await self.providers[name].get(where, record_id, None)
                if version is not None and version.status == store.ACTIVE:
                    return version
        raise record_not_found()

    async def _every_record(self, scope: list[str]) -> list[Version]:
        found: list[Version] = []
        for memory_id in scope:
            provider = self._provider(memory_id)
            after: str | None = None
            while provider is not None and not self.capped:
                page = await provider.listing(Listing(memory_id, after=after, limit=PAGE))
                found.extend(page[: MAX_VISITED - len(found)])
                self.capped = len(found) >= MAX_VISITED
                if len(page) < PAGE:
                    break
                after = page[-1].id
        return found

    # -- one hop ----------------------------------------------------------------------------
    async def _outgoing(self, frontier: list[Version]) -> list[Version]:
        """The current records the frontier names, in memories the caller may read."""
        wanted: dict[str, set[str]] = {}
        await self.reach(_targets(frontier))
        for version in frontier:
            for ref in version.record.references:
                target = ref.get("memory_id")
                if self._readable(target) and ref["record_id"] not in self.visited:
                    wanted.setdefault(str(target), set()).add(ref["record_id"])
        found = []
        for memory_id, record_ids in wanted.items():
            provider = self._provider(memory_id)
            if provider is None:
                continue
            for record_id in sorted(record_ids):
                named = await provider.get(memory_id, record_id, None)
                if named is not None and named.status == store.ACTIVE:
                    found.append(named)
        return found

    async def _incoming(self, scope: list[str], frontier: list[Version]) -> list[Version]:
        """The records of the scope that name one of the frontier."""
        ids = [version.id for version in frontier]
        by_provider: dict[str, list[str]] = {}
        for memory_id in scope:
            by_provider.setdefault(self.provider_names[memory_id], []).append(memory_id)
        found: list[Version] = []
        for name, memory_ids in by_provider.items():
            if name not in self.providers:
                continue
            try:
                found.extend(await self.providers[name].referrers(memory_ids, ids))
            except ApiError as exc:
                if exc.code != "memory_unsupported":
                    raise
                if INCOMING_UNSUPPORTED not in self.degraded:
                    self.degraded.append(INCOMING_UNSUPPORTED)
        return found

    def _visit(self, versions: Iterable[Version]) -> list[Version]:
        """The ones not visited before, now visited (within the walk's bound)."""
        new = []
        for version in versions:
            if version.id in self.visited:
                continue
            if len(self.visited) >= MAX_VISITED:
                self.capped = True
                break
            self.visited[version.id] = version
            new.append(version)
        return new

    # -- what is answered -------------------------------------------------------------------
    async def _nodes(self, versions: list[Version]) -> list[GraphNode]:
        names = await self.db.read(store.memories_by_ids, sorted({v.memory_id for v in versions}))
        return [
            GraphNode(
                record=await self.shown(version),
                memory_id=version.memory_id,
                memory_name=names[version.memory_id].name if version.memory_id in names else "",
            )
            for version in versions
        ]

    def _edges(self, nodes: list[Version]) -> list[GraphEdge]:
        """Every reference a node holds: available, with its meaning and its memory, when
        the caller may read where it leads; otherwise the record id alone."""
        edges: list[GraphEdge] = []
        said: set[tuple[str, str, str | None]] = set()
        for version in nodes:
            source = GraphEnd(version.id, version.memory_id)
            for ref in version.record.references:
                target = ref.get("memory_id")
                available = self._readable(target)
                rel = ref.get("rel") if available else None
                if (version.id, ref["record_id"], rel) in said:
                    continue
                said.add((version.id, ref["record_id"], rel))
                edges.append(
                    GraphEdge(
                        source=source,
                        target=GraphEnd(ref["record_id"], str(target) if available else None),
                        rel=rel,
                        available=available,
                    )
                )
        return edges

    def _readable(self, memory_id: object) -> bool:
        return isinstance(memory_id, str) and READ in self.access.on(memory_id)

    def _provider(self, memory_id: str) -> MemoryProvider | None:
        return self.providers.get(self.provider_names.get(memory_id, ""))


def _targets(versions: Iterable[Version]) -> list[str]:
    """The memories the references of these records lead into."""
    return [
        ref["memory_id"]
        for version in versions
        for ref in version.record.references
        if isinstance(ref.get("memory_id"), str)
    ]
