"""A provider's capability document (Memories §10.2): what it does natively, what its adapter
emulates, and what it lacks, said so that nothing is approximated in silence (§10.3).

The same shape as the recall branch's (`mem-recall`, in provider.py), field for field, so that
when both are merged this module gives way to that one and only the imports change."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ObserveCapability:
    keeps_episodes: bool
    answers: str  # "records" (what was kept, at once) or "job" (202, derived later)


@dataclass(frozen=True)
class RecallCapability:
    signals: tuple[str, ...]  # of query, text, filters: what is not here is `degraded`
    abstain: bool


@dataclass(frozen=True)
class HistoryCapability:
    content: str  # versions, snapshots or none
    structure: str


@dataclass(frozen=True)
class FreeQueries:
    languages: tuple[str, ...]
    write: bool


@dataclass(frozen=True)
class QueriesCapability:
    named: bool
    languages: tuple[str, ...]  # the languages a named query's `body` may be written in
    free: FreeQueries | None  # None: not declared


@dataclass(frozen=True)
class ContentCapability:
    media: tuple[str, ...]  # media types kept, as patterns (text/*)
    bytes: str  # kept or referenced
    describes: tuple[str, ...]


@dataclass(frozen=True)
class Capabilities:
    """What a provider does, said honestly (§10.2): an operation the adapter supplies itself
    is `emulated`, a gap is absent or false."""

    id: str
    isolation: str  # container or enforced_filter
    derivation: str  # write_time, background, agent or none
    observe: ObserveCapability
    recall: RecallCapability
    history: HistoryCapability
    revise: str  # native, emulated or false
    forget: str
    erase_unreachable: str  # "reported" (`unreachable` names what it missed) or "none"
    prime: bool
    consolidate: str | bool  # runs, trigger or False
    queries: QueriesCapability
    types: bool
    graph_entities: str  # derived, stated or none
    content: ContentCapability
