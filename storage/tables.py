"""Every table, as SQLModel rows: one per protocol object, plus keys, events, idempotency,
the replicas' leases and relayed questions, MCP secrets and skill bundles.

The schema itself is made by the migrations (storage/migrations/): a change here needs a new
revision there."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, LargeBinary, Text, false, text
from sqlmodel import Field, SQLModel, col

from storage.vector_extension import Embedding


class Principal(SQLModel, table=True):
    id: str = Field(primary_key=True)
    name: str = Field(index=True, unique=True)
    created_at: float
    # Given on its first turn (keys.agent_number): its agents' uid under a root server.
    agent_number: int | None = Field(default=None, index=True, unique=True)


class ApiKey(SQLModel, table=True):
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    key_hash: str = Field(index=True, unique=True)  # sha256 of the key; the key is never stored
    created_at: float
    revoked_at: float | None = None


class HarnessRow(SQLModel, table=True):
    __tablename__ = "harness"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    name: str
    base: str
    config: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    created_at_ms: int = Field(sa_type=BigInteger)  # past PostgreSQL's 32-bit integer
    is_default: bool = False
    deleted_at: float | None = None


class SessionRow(SQLModel, table=True):
    __tablename__ = "session"
    # The few sessions a turn holds now: what the replicas' lease rounds look among for one
    # whose release was lost (engine/replicas/cluster.py), without reading every session.
    __table_args__ = (
        Index(
            "ix_session_held",
            "active_response_id",
            postgresql_where=text("active_response_id IS NOT NULL"),
            sqlite_where=text("active_response_id IS NOT NULL"),
        ),
    )
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    harness_id: str = Field(index=True)
    container_id: str
    title: str = ""
    status: str = "in_progress"
    created_at: int
    updated_at: int
    native_session_id: str | None = None  # the CLI's own conversation id, for resume
    active_response_id: str | None = None  # the turn running now, if any
    deleted_at: float | None = None
    # The environment its turns read (Environments §6), and the version it started with:
    # the session keeps that version for later turns.
    environment_id: str | None = None
    environment_version: int | None = None


class ResponseRow(SQLModel, table=True):
    __tablename__ = "response"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    session_id: str = Field(index=True)
    previous_response_id: str | None = Field(default=None, index=True)
    status: str = Field(index=True)
    store: bool = True
    model: str = ""  # the model that ran; lets an unretained response still be named
    created_at: int
    finished_at: float | None = None
    input_items: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    # The final response object, written once when the task reaches a terminal state.
    final: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    deleted_at: float | None = None
    # Several replicas (engine/replicas/cluster.py): the replica that runs the turn, a cancel asked
    # for on another one, and the turn's place in the shared admission line.
    replica_id: str | None = None
    cancel_requested: bool = False
    stop_details: str | None = None  # with cancel_requested: a deadline's reason (JSON)
    # "waiting" or "admitted" while it takes or holds a slot of the shared line, "own_queue"
    # once it has waited a moment in its replica's own queue (indexed: the line is counted
    # at every admission, among every response ever run)
    admission: str | None = Field(default=None, index=True)
    admission_at: float | None = None  # when it arrived: its place in the line
    # The environment and version this turn read (Environments §6.5).
    environment_id: str | None = None
    environment_version: int | None = None


class ReplicaRow(SQLModel, table=True):
    """A running server process on a shared database, alive while its lease is renewed."""

    __tablename__ = "replica"
    id: str = Field(primary_key=True)
    heartbeat_at: float  # the database's clock, in seconds
    started_at: float
    slots: int = Field(default=0, sa_column_kwargs={"server_default": "0"})  # its admission block
    slots_op: str | None = None  # the id of the block's last change (storage/replicas.py)
    # While it LISTENs to uhp_events: commits of events NOTIFY only while some replica does.
    hears_events: bool = Field(default=False, sa_column_kwargs={"server_default": false()})


class RelayedQuestionRow(SQLModel, table=True):
    """A question a turn waits on, while it waits, and the answer another replica took for
    it until the replica running the turn delivers it, or that replica's request to park the
    turn (engine/replicas/answer_relay.py)."""

    __tablename__ = "relayed_question"
    response_id: str = Field(primary_key=True)
    call_id: str = Field(primary_key=True)
    arguments: str
    answer: str | None = None
    park_requested: bool = Field(default=False, sa_column_kwargs={"server_default": false()})


class EventRow(SQLModel, table=True):
    """One streamed event. The ordered events of a response are its source of truth."""

    __tablename__ = "event"
    response_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    data: dict[str, Any] = Field(sa_column=Column(JSON))


class IdempotencyRow(SQLModel, table=True):
    __tablename__ = "idempotency"
    principal_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    fingerprint: str
    response_id: str
    created_at: float


Index("ix_session_principal_updated", col(SessionRow.principal_id), col(SessionRow.updated_at))


class FileRow(SQLModel, table=True):
    """An uploaded (or inlined) input file; its bytes live in the blob store."""

    __tablename__ = "file"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    filename: str  # already made safe for a workspace
    bytes: int = Field(sa_type=BigInteger)
    media_type: str
    sha256: str = Field(index=True)
    purpose: str = "user_data"
    created_at: int
    deleted_at: float | None = None


class ArtifactRow(SQLModel, table=True):
    """A file a turn created or changed in its session's workspace (Files §2)."""

    __tablename__ = "artifact"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    session_id: str = Field(index=True)
    container_id: str = Field(index=True)
    response_id: str = Field(index=True)
    filename: str  # the path relative to the workspace
    bytes: int = Field(sa_type=BigInteger)
    media_type: str
    sha256: str = Field(index=True)
    created_at: int


class ShareRow(SQLModel, table=True):
    """A published read-only view of a session. `token` is the only way to reach it."""

    __tablename__ = "share"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    session_id: str = Field(index=True)
    token: str = Field(index=True, unique=True)
    created_at: int


class DoorSessionRow(SQLModel, table=True):
    """A front door's own session id, mapped to the UHP session it continues (one per
    principal, harness, door and id)."""

    __tablename__ = "door_session"
    principal_id: str = Field(primary_key=True)
    harness_id: str = Field(primary_key=True)
    door: str = Field(primary_key=True)
    external_id: str = Field(primary_key=True)
    session_id: str = Field(index=True)
    created_at: int


class McpSecretRow(SQLModel, table=True):
    """An MCP server's credential, kept apart from harness config (storage/mcp_secrets.py)."""

    __tablename__ = "mcp_secret"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    value: str
    created_at: float
    # url_origin() of the server URL the secret was stored for; None only for a secret of
    # an older database that no harness used (migration 0002): good for nothing.
    origin: str | None = None


class SkillBlobRow(SQLModel, table=True):
    """Bytes of a skill bundle's file, by their sha256 (storage/skills.py)."""

    __tablename__ = "skill_blob"
    digest: str = Field(primary_key=True)  # sha256 hex of data
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class SkillBundleRow(SQLModel, table=True):
    __tablename__ = "skill_bundle"
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    # [{"path", "digest", "size", "encoding"}], sorted by path
    files: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    created_at: float


class EnvironmentRow(SQLModel, table=True):
    """A principal's environment (Environments §2): a project built into read-only versions
    that sessions mount. Deleted for good with its versions (storage/environments.py)."""

    __tablename__ = "environment"
    # The slug is the mount path's segment: one per principal (environment_exists).
    __table_args__ = (Index("ix_environment_slug", "principal_id", "slug", unique=True),)
    id: str = Field(primary_key=True)
    principal_id: str = Field(index=True)
    name: str
    slug: str
    description: str = ""
    entry: str = ""
    # What the owner declared beside the manifests: {"pip": [...], "npm": [...], "apt": [...]}
    declared: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    runtime: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    active_version: int | None = None  # the version sessions read
    latest_version: int | None = None  # the newest build, whatever became of it
    created_at_ms: int = Field(sa_type=BigInteger)
    updated_at_ms: int = Field(sa_type=BigInteger)


class EnvironmentVersionRow(SQLModel, table=True):
    """One build of an environment: its record while it runs, then the immutable version."""

    __tablename__ = "environment_version"
    environment_id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    status: str  # building, ready, failed
    stage: str = ""  # the step running now, while building
    log: str = Field(default="", sa_type=Text)  # the installers' output so far
    error: str = Field(default="", sa_type=Text)  # why it failed
    # [{"manager", "name", "version"}]: what the build installed
    packages: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    files: int = 0  # the source's files, snapshotted
    size_bytes: int = Field(default=0, sa_type=BigInteger)  # the whole version on disk
    started_at: float
    finished_at: float | None = None
    # When retention removed its folder (environments/retention.py); the record stays.
    collected_at: float | None = None


class MemoryRow(SQLModel, table=True):
    """A memory (Memories §2): a node of the tree. Access is not here but in its grants and
    its ancestors' (memory_grant); `owner_id` is whose share of UHP_MEMORY_MAX_PER_PRINCIPAL
    it uses: who created it, until another member takes the creator's own `delete` on it
    away (storage/memories.py `_charge_taker`)."""

    __tablename__ = "memory"
    id: str = Field(primary_key=True)
    parent_id: str | None = Field(default=None, index=True)  # None: a root
    name: str
    description: str = ""
    restricted: bool = False  # grants on ancestors stop here (§3.2)
    provider: str
    owner_id: str = Field(index=True)  # the member it counts against (see above)
    created_at_ms: int = Field(sa_type=BigInteger)
    updated_at_ms: int = Field(sa_type=BigInteger)


class MemoryGrantRow(SQLModel, table=True):
    """One principal's privileges on one memory (Memories §3.1); they flow down to its
    descendants until a restricted one. One per principal per node (a second replaces it)."""

    __tablename__ = "memory_grant"
    __table_args__ = (
        Index("ix_memory_grant_node_principal", "memory_id", "principal", unique=True),
        # A caller's grants, from the index alone (migration 0019).
        Index("ix_memory_grant_principal_node", "principal", "memory_id"),
    )
    id: str = Field(primary_key=True)
    memory_id: str = Field(index=True)
    principal: str  # `<kind>:<id>`, as a grant names it
    privileges: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    created_at_ms: int = Field(sa_type=BigInteger)


class MemoryRecordRow(SQLModel, table=True):
    """One version of a record (Memories §4, §5.3): a change appends a version and closes the
    one before it, so a record is every row with its id, the newest current. `written_by` and
    `written_at` are the server's stamp, never the caller's."""

    __tablename__ = "memory_record"
    __table_args__ = (Index("ix_memory_record_memory_status", "memory_id", "status"),)
    id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    memory_id: str
    type: str
    title: str | None = None
    # [{"type": "text", "text"}, {"type": "file", "file": {...}, "text"?}, {"type": "x.…"}]
    content: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    attributes: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    # `references` [{"rel"?, "memory_id"?, "record_id"}], as written (resolved per reader on
    # a read); `refs` because REFERENCES is an SQL keyword
    refs: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    status: str  # active, superseded, forgotten
    supersedes: int | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    written_at_ms: int = Field(sa_type=BigInteger)
    invalidated_at_ms: int | None = Field(default=None, sa_type=BigInteger)
    # {"kind", "id", "type"?}: who wrote this version, from the authenticated caller
    written_by: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    follows: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # What recall by words matches (§6.2): the title, text parts and file parts' `text`, one
    # string (storage/memory_search.py). Indexed per dialect by migration 0014: SQLite FTS5
    # (`memory_record_fts`, kept by triggers), PostgreSQL a generated tsvector with GIN.
    search_text: str | None = None


class MemoryVectorRow(SQLModel, table=True):
    """A record version's meaning (§6.2 `query`): the vector the embedding model `model` gave
    for its words (`search_text`), written with the version (storage/vector_extension.py's
    `Embedding`: float32s for sqlite-vec on SQLite, `real[]` for pgvector on PostgreSQL).
    A version without one (no embedder then, or the embedder failed) is not found by meaning
    (storage/memory_vectors.py says how recall reports it)."""

    __tablename__ = "memory_record_vector"
    __table_args__ = (Index("ix_memory_record_vector_memory", "memory_id"),)
    id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    memory_id: str
    model: str
    dimensions: int
    embedding: list[float] = Field(sa_type=Embedding)


class MemoryReplayRow(SQLModel, table=True):
    """A write of the Memories chapter made with an Idempotency-Key (§5.1): claimed before
    it runs (`answer` None), then its answer, given again to a repeat of the same request."""

    __tablename__ = "memory_replay"
    principal_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    fingerprint: str  # the method, the path and the body, hashed
    answer: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    created_at: float


class MemoryQueryRow(SQLModel, table=True):
    """A named query of a memory (Memories §6.4): defined once by a writer, run with
    parameters; `language` and `body` are its provider's (the embedded provider's: a recall
    template, engine/facade/memory_queries.py)."""

    __tablename__ = "memory_query"
    memory_id: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    description: str
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))  # JSON Schema
    requires: str  # read or write
    language: str
    body: str
    written_by: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    updated_at_ms: int = Field(sa_type=BigInteger)


class MemoryReferenceRow(SQLModel, table=True):
    """One reference of one version of a record, kept by its target (Memories §6.6): the
    graph's edges coming into a record are found without reading every record. The
    embedded provider's index, written with the version (its `refs` are the truth)."""

    __tablename__ = "memory_reference"
    record_id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    position: int = Field(primary_key=True)  # its place in the version's references
    memory_id: str = Field(index=True)
    target_record_id: str = Field(index=True)


class MemoryAttributeRow(SQLModel, table=True):
    """A version's top-level attribute whose value is a string (Memories §6.2 `filters`), one
    row each: recall's condition `attributes.<name>` eq (or in) a string finds the versions
    holding it by this index, in the memories a question covers, instead of reading every
    version there (storage/memory_attributes.py). The embedded provider's index, written
    with the version; the version's `attributes` stay the truth (each condition is still
    evaluated on the versions found)."""

    __tablename__ = "memory_record_attribute"
    __table_args__ = (
        Index("ix_memory_record_attribute_value", "name", "value", "memory_id"),
        Index("ix_memory_record_attribute_memory", "memory_id"),
        {"sqlite_with_rowid": False},  # its rows are its key (migration 0021)
    )
    record_id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    name: str = Field(primary_key=True)
    memory_id: str
    value: str


class MemoryFileUseRow(SQLModel, table=True):
    """A file (`POST /v1/files`) that a version of a record names in its content (Memories
    §4.3, §7): the server keeps the bytes while a version names them, whichever provider
    keeps the record, and an erase removes those nothing else names."""

    __tablename__ = "memory_file_use"
    record_id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    file_id: str = Field(primary_key=True, index=True)
    memory_id: str = Field(index=True)


class MemorySnapshotRow(SQLModel, table=True):
    """A name for an instant of a memory (Memories §5.3): it copies nothing; reading `as_of`
    its instant is the same read."""

    __tablename__ = "memory_snapshot"
    id: str = Field(primary_key=True)
    memory_id: str = Field(index=True)
    name: str
    message: str = ""
    at_ms: int = Field(sa_type=BigInteger)
    written_by: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))


class HarnessMemoryRow(SQLModel, table=True):
    """A harness's two settings of the Memories chapter (§9): where its agent's unaddressed
    writes and its turns go, and whether finished turns are observed. What the agent may
    reach is not here: it is read off the grants to the agent's principal."""

    __tablename__ = "harness_memory"
    harness_id: str = Field(primary_key=True)
    default_memory_id: str | None = None
    observe: bool = True


class SessionMemoryRow(SQLModel, table=True):
    """What a session's agent was given of its memories when the session started (§9.1): the
    session's default memory (the task's `metadata.memory`, else the harness's) and the
    priming block placed in its instructions, kept so that every turn of the session carries
    the same block (priming is not repeated, and stable instructions keep prompt caching)."""

    __tablename__ = "session_memory"
    session_id: str = Field(primary_key=True)
    memory_id: str | None = None
    primer: str = Field(default="", sa_column=Column(Text, nullable=False))
    # What the primer placed, per memory, in tokens: {memory_id: tokens}.
    primed: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    # The session's CLI compacted its conversation since the block was placed: its next turn
    # places one computed afresh (§9.1, "after the conversation is compacted").
    reprime: bool = Field(default=False, sa_column_kwargs={"server_default": false()})


class SignInRow(SQLModel, table=True):
    """A browser signed in with an API key (the owner's console): the key was exchanged for
    this row, and the browser holds only a random token whose hash is `id`. It ends at
    `expires_at`, on sign-out, and as soon as `key_hash`'s key is revoked."""

    __tablename__ = "sign_in"
    id: str = Field(primary_key=True)  # sha256 of the browser's token; the token is never stored
    principal_id: str = Field(index=True)
    key_hash: str = Field(index=True)  # the key it was exchanged for (sha256, as api_key holds it)
    csrf_token: str  # the synchronizer token every write from this sign-in carries
    created_at: float
    expires_at: float = Field(index=True)
