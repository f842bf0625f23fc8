"""The graph read (Memories §6.6): what a request asks, and the graph as one reader sees it.

Records are the nodes and their references the edges; there is no second structure. An edge
into a memory the reader may not read is `available: false`, says nothing but the record id
it names (not its meaning, not its memory: §4.2), and its target is never a node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uhp_server.memories.errors import memory_invalid
from uhp_server.memories.records import MemoryRecord

MAX_HOPS = 3
DEFAULT_HOPS = 1
DEFAULT_LIMIT = 200
MAX_LIMIT = 1000
MAX_TYPES = 50
MAX_ID = 128


@dataclass(frozen=True)
class GraphRequest:
    around: str | None  # None: every record of the memory and what is below it
    hops: int
    types: frozenset[str] | None  # None: every type
    limit: int


@dataclass(frozen=True)
class GraphNode:
    record: MemoryRecord
    memory_id: str
    memory_name: str


@dataclass(frozen=True)
class GraphEnd:
    """One end of an edge: `memory_id` None where the reader may not follow it."""

    record_id: str
    memory_id: str | None


@dataclass(frozen=True)
class GraphEdge:
    source: GraphEnd  # the record that holds the reference
    target: GraphEnd  # the record it names
    rel: str | None  # None when unavailable, or when the writer gave none
    available: bool


@dataclass(frozen=True)
class MemoryGraph:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    truncated: bool  # there were more nodes than `limit`
    degraded: list[str]  # what was cut short or not done


def graph_request(body: dict[str, Any]) -> GraphRequest:
    """The request checked: memory_invalid, naming the field, for anything it cannot be."""
    around = body.get("around")
    if around is not None and (not isinstance(around, str) or not 0 < len(around) <= MAX_ID):
        raise memory_invalid("`around` is a record's id.", "around")
    hops = _whole(body.get("hops", DEFAULT_HOPS), "hops", 0, MAX_HOPS)
    limit = _whole(body.get("limit", DEFAULT_LIMIT), "limit", 1, MAX_LIMIT)
    types = body.get("types")
    if types is not None and (
        not isinstance(types, list)
        or not 0 < len(types) <= MAX_TYPES
        or not all(isinstance(t, str) and 0 < len(t) <= MAX_ID for t in types)
    ):
        raise memory_invalid(f"`types` is a list of 1 to {MAX_TYPES} record types.", "types")
    return GraphRequest(around, hops, frozenset(types) if types is not None else None, limit)


def _whole(value: object, name: str, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise memory_invalid(f"`{name}` is a whole number from {least} to {most}.", name)
    return value
