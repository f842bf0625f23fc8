"""A provider's capability document (Memories §10.2): what it does natively, what its adapter
emulates, and what it lacks, said so that nothing is approximated in silence (§10.3)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Support = Literal["native", "emulated", "none"]
Kept = Literal["versions", "snapshots", "none"]


@dataclass(frozen=True)
class ObserveCapability:
    keeps_episodes: bool
    answers: Literal["records", "job"]


@dataclass(frozen=True)
class RecallCapability:
    signals: tuple[str, ...]  # of "query", "text", "filters"
    abstain: bool


@dataclass(frozen=True)
class HistoryCapability:
    content: Kept
    structure: Kept


@dataclass(frozen=True)
class EraseCapability:
    # "guaranteed": an empty `unreachable` is a guarantee; "reported": copies it cannot
    # reach are named in `unreachable`.
    unreachable: Literal["guaranteed", "reported"]


@dataclass(frozen=True)
class GraphCapability:
    entities: Literal["derived", "stated", "none"]


@dataclass(frozen=True)
class ContentCapability:
    media: tuple[str, ...]
    bytes: Literal["stored", "referenced", "none"]
    describes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Capabilities:
    id: str
    isolation: Literal["container", "enforced_filter"]
    derivation: Literal["write_time", "background", "agent", "none"]
    observe: ObserveCapability
    recall: RecallCapability
    history: HistoryCapability
    revise: Support
    forget: Support
    erase: EraseCapability
    graph: GraphCapability
    content: ContentCapability
    prime: bool = False
    consolidate: Literal["runs", "none"] = "none"
    types: bool = False
    queries: dict[str, Any] = field(default_factory=lambda: {"named": False, "free": None})

    def to_json(self) -> dict[str, Any]:
        """The document as GET /v1/memories/providers lists it (§10.2)."""
        said = asdict(self)
        said["recall"]["signals"] = list(self.recall.signals)
        said["content"]["media"] = list(self.content.media)
        said["content"]["describes"] = list(self.content.describes)
        return said
