"""The chapter's objects as the facade answers them; the door writes them as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Memory:
    """A memory as one caller sees it (§2): its privileges there, the ancestors it may see,
    and the children it may see counted."""

    id: str
    name: str
    description: str
    parent_id: str | None  # None on a root, and equally where the caller may not see it
    ancestors: list[str]
    restricted: bool
    provider: str
    privileges: list[str]
    records: int
    children: int
    created_at_ms: int
    updated_at_ms: int


@dataclass(frozen=True)
class MemoryDeleted:
    id: str
    memories: list[str]  # the removed ones the caller could see: this one first


@dataclass(frozen=True)
class Grant:
    id: str
    memory_id: str  # the node it sits on
    principal: str
    privileges: list[str]
    inherited: bool  # it sits on an ancestor


@dataclass(frozen=True)
class Writer:
    """Who wrote a version (§3 `written_by`), stamped by the server."""

    kind: str
    id: str
    type: str | None = None

    def to_json(self) -> dict[str, Any]:
        said: dict[str, Any] = {"kind": self.kind, "id": self.id}
        if self.type is not None:
            said["type"] = self.type
        return said


@dataclass(frozen=True)
class Reference:
    """A reference as one reader sees it (§4.2): with `available` false, nothing but the
    record id (not the memory it leads into, nor what it means)."""

    record_id: str
    available: bool
    rel: str | None = None
    memory_id: str | None = None


@dataclass(frozen=True)
class RecordTime:
    valid_from: str | None
    valid_to: str | None
    written_at_ms: int
    invalidated_at_ms: int | None


@dataclass(frozen=True)
class MemoryRecord:
    """One version of a record, its references resolved for the reader."""

    id: str
    memory_id: str
    type: str
    title: str | None
    content: list[dict[str, Any]]
    attributes: dict[str, Any]
    version: int
    status: str
    supersedes: int | None
    time: RecordTime
    written_by: Writer
    references: list[Reference]
    follows: dict[str, Any] | None = None


@dataclass(frozen=True)
class RecordPage:
    data: list[MemoryRecord]
    next: str | None = None


@dataclass(frozen=True)
class Neighbour:
    """A memory next to the one asked (§6.3 `parent`, `children`): where to go next."""

    id: str
    name: str
    description: str
    records: int


@dataclass(frozen=True)
class RecallHit:
    """One result: the record as this reader sees it, the memory it is in, its score and
    the signals that found it."""

    record: MemoryRecord
    memory_id: str
    memory_name: str
    score: float | None
    why: list[str]


@dataclass(frozen=True)
class RecallResult:
    results: list[RecallHit]
    parent: Neighbour | None  # None on a root, and equally when the caller may not read it
    children: list[Neighbour]
    degraded: list[str]
    abstain: bool


@dataclass(frozen=True)
class NamedQuery:
    """A named query of a memory (§6.4), as defined."""

    memory_id: str
    name: str
    description: str
    params: dict[str, Any]
    requires: str
    language: str
    body: str


@dataclass(frozen=True)
class GrantedMemory:
    """A memory a harness's agent was granted, as its harness shows it (§9)."""

    id: str
    name: str
    privileges: list[str]
    default: bool
    turns_sent_to: str | None = None  # where its provider sends turns it observes (§9.1)


@dataclass(frozen=True)
class HarnessMemories:
    """A harness's agent and its memories, `GET /v1/harnesses/{id}/memories` (§9)."""

    principal: str
    default_memory_id: str | None
    observe: bool
    data: list[GrantedMemory]
    # §9.1: where every observed turn goes beyond this server when it leaves it (the default
    # memory's provider's `turns_sent_to`), said to whoever reads or sets the default.
    notice: str | None = None
