"""What keeps a memory's records (Memories §10): the seam a provider's adapter fills.

Everything above it, the tree, the grants, the cutoff and references across memories, is the
server's (engine/facade/memories.py), decided before a provider is called: a provider is
only ever asked about memories the caller may reach, by their ids. The embedded provider
(embedded.py) keeps records in the server's own database.

Recall (§6) is asked of a provider as a `Question` naming the memories the server decided the
question covers (`Access.searched`), and nothing else; the provider answers with what it
found, what it did not do (`degraded`) and whether it abstains. The graph (§6.6) is built by
the server from what every provider has: records, their references, and `referrers`.
Semantic recall needs vectors: an `Embedder` (the configured model provider's embeddings,
through the gateway) is handed to a provider that can use one; without it a provider
declares `query` absent from its signals and answers a question that asks it with
`degraded: ["query:not_supported"]`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from uhp_server.memories.records import Writer


@dataclass(frozen=True)
class NewRecord:
    """A version as written: its fields, and who wrote it (the server's stamp)."""

    memory_id: str
    type: str
    title: str | None
    content: list[dict[str, Any]]
    attributes: dict[str, Any]
    references: list[dict[str, Any]]  # [{"record_id", "memory_id"?, "rel"?}]
    valid_from: str | None
    valid_to: str | None
    written_by: Writer


@dataclass(frozen=True)
class Version:
    """One version of a record as the provider keeps it; references unresolved."""

    id: str
    memory_id: str
    version: int
    status: str  # active, superseded, forgotten
    supersedes: int | None
    written_at_ms: int
    invalidated_at_ms: int | None
    record: NewRecord
    follows: dict[str, Any] | None = None


@dataclass(frozen=True)
class Listing:
    """One memory's records: current (`include_forgotten` adds the forgotten ones), or as
    the memory held them at `as_of`; a page after the id `after`."""

    memory_id: str
    type: str | None = None
    include_forgotten: bool = False
    as_of: int | None = None
    after: str | None = None
    limit: int = 100


@dataclass(frozen=True)
class Erasure:
    """What an erase removed, and the copies the provider could not reach (§5.2): an empty
    `unreachable` is a guarantee."""

    erased: list[str]
    unreachable: list[str]


@dataclass(frozen=True)
class FieldFilter:
    """One condition of a recall's `filters` (§6.2) over `type`, `attributes.*` or `time.*`:
    op is eq, ne, gt, gte, lt, lte or in (value a list)."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class AllOf:
    """Filters that must all hold (`{"and": [...]}`)."""

    conditions: tuple[Filter, ...]


@dataclass(frozen=True)
class AnyOf:
    """Filters of which one must hold (`{"or": [...]}`)."""

    conditions: tuple[Filter, ...]


Filter = FieldFilter | AllOf | AnyOf


@dataclass(frozen=True)
class Question:
    """A recall as the server hands it to a provider: the memories it covers were decided by
    the server (grants, cutoff, depth and cap) before the provider is asked."""

    memory_ids: tuple[str, ...]
    query: str | None = None  # meaning: similarity to a question
    text: str | None = None  # words: full-text match
    filters: tuple[Filter, ...] = ()  # fields: all must hold
    types: tuple[str, ...] | None = None
    as_of: int | None = None  # ms; the memory as it stood then
    include_forgotten: bool = False
    limit: int = 8


@dataclass(frozen=True)
class Found:
    """One result: the version found, its score (higher is better, 0..1 where the provider
    can) and the signals that produced it (`query`, `text`, `filters`)."""

    version: Version
    score: float
    why: tuple[str, ...]


@dataclass(frozen=True)
class Answer:
    found: list[Found]
    degraded: list[str]  # what the question asked and was not done, e.g. "text:not_supported"
    abstain: bool  # nothing found answers the question, in the provider's judgement


class Embedder(Protocol):
    """Vectors for texts from the configured model provider (through the gateway)."""

    model: str

    @property
    def destination(self) -> str:
        """Where the texts go to be embedded, for a person to read (§9.1's notice)."""
        ...

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order; EmbeddingsUnavailable when none came back."""
        ...


class EmbeddingsUnavailable(Exception):
    """The model provider gave no vectors; the message says why (no URL, no key)."""


# -- the capability document (§10.2) ---------------------------------------------------------
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
    free: FreeQueries | None  # None: not declared (§6.5: only where it can be confined)


@dataclass(frozen=True)
class ContentCapability:
    media: tuple[str, ...]  # media types kept, as patterns (text/*)
    bytes: str  # kept or referenced
    describes: tuple[str, ...]


@dataclass(frozen=True)
class Capabilities:
    """What a provider does, said honestly (§10.2): an operation the adapter supplies itself
    is `emulated`, a gap is absent or false, never approximated in silence."""

    id: str
    isolation: str  # container or enforced_filter
    derivation: str  # write_time, background, agent or none
    observe: ObserveCapability
    recall: RecallCapability
    history: HistoryCapability
    revise: str  # native, emulated or false
    forget: str
    erase_unreachable: str  # "reported" or "none": whether `unreachable` names what it missed
    prime: bool
    consolidate: str | bool  # runs, trigger or False
    queries: QueriesCapability
    types: bool
    graph_entities: str  # derived, stated or none
    content: ContentCapability


class MemoryProvider(Protocol):
    id: str
    # The media types a file part may carry in its records (§10.2 `content.media`, patterns
    # as `image/*`); the server refuses a write naming a file of another type.
    media: tuple[str, ...]

    def capabilities(self) -> Capabilities:
        """Its capability document (§10.2), as `GET /v1/memories/providers` lists it."""
        ...

    def turns_sent_to(self) -> str | None:
        """Where an observed turn's text goes beyond this server's machine, for a person to
        read, or None when it stays here. §9.1: a server MUST tell the person who sets a
        default memory whose provider is outside the server that every turn will be sent to
        it; a provider that keeps its records here but hands the text to an embedding model
        sends it out as surely, so it says so too."""
        ...

    async def remember(self, records: list[NewRecord]) -> list[Version] | None:
        """Each as a new record, version 1; None when their memory is gone."""
        ...

    async def append(self, record_id: str, after: int, record: NewRecord) -> Version | None:
        """A new version after version `after`; None when that is no longer the current
        active one (another change came first)."""
        ...

    async def forget(self, memory_id: str, record_id: str) -> Version | None: ...

    async def get(self, memory_id: str, record_id: str, as_of: int | None) -> Version | None: ...

    async def history(self, memory_id: str, record_id: str) -> list[Version]: ...

    async def listing(self, listing: Listing) -> list[Version]: ...

    async def counts(self, memory_ids: Iterable[str]) -> dict[str, int]:
        """Active records per memory."""
        ...

    async def locate(self, record_ids: Iterable[str]) -> dict[str, str]:
        """The memory each of these records is in, for those this provider keeps."""
        ...

    async def erase(self, memory_id: str, record_ids: list[str]) -> Erasure | None:
        """Every version of each record, and what was derived from them, removed for good;
        None, erasing nothing, when one is not a record of this memory."""
        ...

    async def drop(self, memory_ids: list[str]) -> None:
        """Every record of these memories, every version, for good."""
        ...

    async def prime(self, memory_id: str) -> list[Version]:
        """What this provider marks as always relevant in this memory (§9.1): placed in an
        agent's instructions when its session starts. How much is the provider's decision."""
        ...

    async def recall(self, question: Question) -> Answer:
        """The records of `question.memory_ids` that answer it, best first, at most
        `question.limit`; a signal this provider lacks is named in `degraded`."""
        ...

    async def referrers(
        self, memory_ids: Iterable[str], record_ids: Iterable[str]
    ) -> list[Version]:
        """The current records of these memories whose references name any of these records
        (the graph's edges coming in, §6.6)."""
        ...
