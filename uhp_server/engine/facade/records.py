"""What the engine hands a door besides tasks: principals, sessions and their turns, files,
shares and harnesses, as read-only records.

A door renders these in its own format and never sees a database row: the engine reads the
rows and copies what a door may know into these (facade/rows.py), so a change of storage
never reaches a door.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from harness_bases.base import Enforcement
from uhp_server.harnesses.config import HarnessConfig


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: every record below belongs to exactly one."""

    id: str
    name: str


@dataclass(frozen=True)
class Session:
    """A chain of turns sharing a conversation and a working directory."""

    id: str
    principal_id: str
    harness_id: str
    container_id: str  # where its artifacts are addressed (Files §2)
    title: str
    status: str
    created_at: int
    updated_at: int
    active_response_id: str | None  # the turn running now, on whichever replica
    # The environment its turns read and the version it keeps (Environments §6); None: none.
    environment_id: str | None = None
    environment_version: int | None = None


@dataclass(frozen=True)
class UploadedFile:
    """A file a client uploaded (or a task brought inline), to give a task as input."""

    id: str
    filename: str
    bytes: int
    media_type: str
    purpose: str
    created_at: int


@dataclass(frozen=True)
class Artifact:
    """A file a turn created or changed in its session's workspace (Files §2)."""

    id: str
    session_id: str
    container_id: str
    response_id: str
    filename: str  # the path relative to the workspace
    bytes: int
    media_type: str
    sha256: str  # its content's address: the archive and the downloads read it by this
    created_at: int


@dataclass(frozen=True)
class Share:
    """A published read-only view of a session; `token` is the only way to reach it."""

    id: str
    session_id: str
    token: str
    created_at: int


@dataclass(frozen=True)
class Turn:
    """One turn of a session's history (Sessions §3), as stored or as it runs now."""

    id: str
    status: str  # the row's: what a turn not retained (store: false) still shows
    created_at: int
    store: bool
    input_items: list[dict[str, Any]]
    response: dict[str, Any] | None  # None: not retained (store: false)
    artifacts: list[Artifact]
    environment_id: str | None = None  # the environment the turn read, and its version
    environment_version: int | None = None


@dataclass(frozen=True)
class TurnPage:
    """Some of a session's turns, in order: the first is turn number `first_number` (1: the
    session's first) of `total`."""

    turns: list[Turn]
    first_number: int
    total: int


@dataclass(frozen=True)
class Harness:
    """A configured harness, with what its base and the catalogue say of it."""

    id: str
    principal_id: str
    name: str
    base: str
    config: HarnessConfig
    created_at_ms: int
    base_label: str  # the base's own label, or its name when the base is not enabled
    enforcement: Enforcement | None  # what the base enforces; None when it is not enabled
    default_model: str | None  # the harness's own, else the catalogue's default for its base
    skills: list[dict[str, Any]]  # rendered: what was written to `skills` (own, suppressions)
    builtin_skills: list[dict[str, Any]]  # rendered: the built-ins it inherits, each `enabled`
    plugins: list[dict[str, Any]]  # rendered: each plugin object (harnesses/plugins/render.py)


@dataclass(frozen=True)
class HarnessSummary:
    """A harness as a door lists or picks it (without rendering its configuration)."""

    id: str
    name: str
    base: str
    created_at_ms: int
    default_model: str | None  # the harness's own `defaultModel`, if it sets one


@dataclass(frozen=True)
class TurnFile:
    """A file a turn produced, with the link it is downloaded from."""

    filename: str
    size: int
    download_url: str


class UploadSink(Protocol):
    """Where an upload's bytes go while a door receives them: hashed and counted as they
    are written, and dropped at once on `discard`."""

    @property
    def size(self) -> int: ...

    def write(self, chunk: bytes) -> None: ...

    def discard(self) -> None: ...


@dataclass(frozen=True)
class SignIn:
    """A browser signed in with a key: `token` is what it holds (given once, at sign-in;
    empty when read back), `csrf_token` what each of its writes must carry."""

    token: str
    csrf_token: str
    principal: Principal
    expires_at: float


@dataclass(frozen=True)
class ApiKeyInfo:
    """One of a principal's API keys, as it may be shown: never the key itself."""

    id: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True)
class UsageDay:
    """A principal's use of one harness on one day (UTC): its turns and their tokens."""

    day: str  # YYYY-MM-DD
    harness_id: str
    turns: int
    input_tokens: int
    output_tokens: int
