"""Server settings: UHP_* environment variables plus the providers' conventional ones.

Every setting has a default that works on a laptop; docs/configuration.md documents them all.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_tools_dir() -> Path:
    return Path.home() / ".cache" / "uhp-server" / "tools"


def default_max_concurrent_turns() -> int:
    """Sized for the machine: a turn mostly waits on its model, so two per core (at least
    two) keeps a laptop responsive while a bigger server takes more."""
    return max(2, 2 * (os.cpu_count() or 1))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="UHP_", extra="ignore")

    data_dir: Path = Path("./uhp-data")
    # Where everything but blobs and workspaces is stored: unset, SQLite at <data dir>/uhp.sqlite3;
    # or a SQLAlchemy URL, e.g. postgresql://user:password@host/db (docs/storage.md).
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str | None = None  # UHP_API_KEY: a valid key of the default principal
    # UHP_SECRETS_KEY: the keys that seal stored secrets (storage/sealing.py), comma-separated,
    # the first sealing; unset: <data dir>/secrets.key, made on first start.
    secrets_key: str | None = Field(default=None, repr=False)
    sandbox: str = "local"  # "local" (bubblewrap), "docker", or another uhp_server.sandboxes name
    tools_dir: Path = Field(default_factory=_default_tools_dir)
    # Comma-separated bases this server enables; unset: every registered base whose CLI is
    # installed (harness_bases.registry), so a new base needs no edit here.
    bases: str | None = None
    # The base a task without metadata.harness_id runs on; unset: codex when enabled, else the
    # first enabled base (harnesses/default_base.py). One not enabled stops start-up.
    default_base: str | None = None
    session_retention_days: float = 30.0  # idle sessions expire after this (session_expired)
    # How long a browser stays signed in to the owner's console after giving its key.
    console_session_hours: float = Field(default=12.0, gt=0, le=24 * 30)
    idempotency_retention_hours: float = 24.0
    max_timeout_seconds: int = 3600  # the longest wall-clock budget any task gets
    default_timeout_seconds: int = 1800  # budget of a task that names none
    # A tool call's budget without ?timeout_seconds= (under the platform's default 30 s wait).
    tool_timeout_seconds: int = Field(default=25, ge=1, le=120)
    # Turns on GET /health and POST /invoke (the AgentOS contract) acting as this principal.
    agentos_principal: str | None = None
    keepalive_seconds: float = 15.0
    cancel_grace_seconds: float = 3.0  # after a clean interrupt, kill the sandbox
    models_cache_seconds: float = 60.0
    # MCP servers on private or loopback addresses (a server on the same network); link-local
    # addresses (cloud metadata) stay refused either way. See gateway/url_policy.py.
    mcp_allow_private_hosts: bool = False
    log_level: str = "INFO"
    # The Chat Completions door (docs/doors/openai-chat.md): a client that leaves a stream
    # before its answer ends cancels the task, as a chat UI's stop button means.
    chat_cancel_on_disconnect: bool = True
    # Connections (docs/operations.md): incomplete requests time out; the cap is lowered
    # further to leave a quarter of the descriptor limit to everything else.
    max_connections: int = 2048
    # Long-lived streams (SSE) one principal holds open at once; unset: a quarter of the room
    # for streams, which is the connection cap less an eighth kept for short requests
    # (uhp_server/http/streams.py).
    max_streams_per_principal: int | None = Field(default=None, ge=1)
    request_header_timeout_seconds: float = 10.0  # a request head, from its first byte
    request_body_timeout_seconds: float = 30.0  # the longest pause inside a request body

    # Files in and artifacts out (docs/sessions-and-files.md).
    max_file_bytes: int = 50 * 1024 * 1024  # one upload or inline file; 413 file_too_large past it
    # A JSON request body; unset means room for one inline file at the limit above (base64
    # grows it by a third) plus 1 MiB of everything else.
    max_request_bytes: int | None = None
    max_artifacts_per_session: int = 500  # artifacts kept per session, over all its turns
    max_artifact_bytes: int = 50 * 1024 * 1024  # one artifact; a larger file is skipped
    max_session_artifact_bytes: int = 500 * 1024 * 1024  # all artifacts of one session
    soffice: str = "soffice"  # LibreOffice, for PDF previews; missing -> 501 preview_unavailable
    preview_timeout_seconds: float = 60.0
    # The origin download_url and share links are built on; unset: the request's own base URL.
    public_base_url: str | None = None

    # The local sandbox's per-turn limits (docs/security.md); "0" disables one. Memory
    # and processes need cgroups (the server as root); the other two work for any user.
    local_sandbox_memory: str = "4g"  # memory of everything in the sandbox, /tmp included
    local_sandbox_pids_limit: int = 512  # processes and threads
    local_sandbox_file_size: str = "4g"  # the largest file a turn may write
    local_sandbox_disk: str = "20g"  # the session's workspace and agent home together
    # uid:gid the agent runs as, one for every principal; auto: the server's own, or under a
    # root server a uid of each principal's own from agent_uid_range (sandbox/agent_user.py).
    local_sandbox_user: str = "auto"
    # Turn cgroups the local sandbox keeps ready, each holding the process that becomes its
    # bwrap (sandbox/local/ready_pool.py): takes the kernel's move into a cgroup (some 10 ms
    # on cgroup v1) off a turn's start. Needs cgroups (a root server); 0: none, the default:
    # on a loaded host it is slower (bwrap then starts inside the agents' CPU group).
    local_ready_pool: int = Field(default=0, ge=0)
    # The uids (first-last) a root server gives principals' agents, with *_SANDBOX_USER auto.
    agent_uid_range: str = "200000-299999"
    # Hosts a sandbox may reach, through the server's egress proxy (docs/security.md);
    # comma-separated names or IP literals. Empty: no egress at all.
    egress_allow_hosts: str = ""
    # Let allowed names resolve to private or loopback addresses (link-local never passes).
    egress_allow_private_hosts: bool = False

    # Environments' builds (docs/environments.md): each runs in the sandbox as its owner's
    # agent, its registries reached through the egress proxy; "0" disables a limit.
    environment_build_timeout_seconds: float = 1800.0  # the whole build, every step together
    environment_build_memory: str = "4g"  # memory of the build's sandbox, as a turn's
    environment_build_disk: str = "10g"  # the version's folder, scratch workspace and home
    # A PEM bundle of certificate authorities a build trusts besides its image's own (a
    # TLS-inspecting proxy's); mounted read-only into the build. Empty: none.
    environment_build_ca_bundle: Path | None = None
    # Environments (docs/environments.md): projects built once and mounted read-only.
    # One file put in or imported; 413 file_too_large past it.
    environment_max_file_bytes: int = Field(default=100 * 1024 * 1024, ge=1)
    # An import: the archive as sent, and its files as extracted (counted as they are).
    environment_max_import_bytes: int = Field(default=1024 * 1024 * 1024, ge=1)
    environment_max_import_files: int = Field(default=20_000, ge=1)  # an import's members
    # One principal's share of the disk: its environments, and the files and bytes of all
    # their sources together (checked on every file put and import; 413 file_too_large).
    environment_max_per_principal: int = Field(default=50, ge=1)
    environment_max_source_bytes_per_principal: int = Field(default=5 * 1024**3, ge=1)
    environment_max_source_files_per_principal: int = Field(default=200_000, ge=1)
    # Imports (archives received and extracted, git clones) running at once, server-wide;
    # one at a time per environment. Past either: 409 environment_busy.
    environment_max_concurrent_imports: int = Field(default=2, ge=1)
    # Builds running at once, server-wide (the others wait, fairly between principals), and
    # the most one principal holds (unset: one less than the limit, as for turns).
    environment_max_concurrent_builds: int = Field(default=2, ge=1)
    environment_max_builds_per_principal: int | None = Field(default=None, ge=1)
    # Retention: besides the active version and every version a live session reads, the
    # newest this many ready versions keep their folders (rollback without a rebuild).
    environment_keep_versions: int = Field(default=3, ge=0)
    # A git import: fetched only from UHP_EGRESS_ALLOW_HOSTS, https, shallow, within this.
    environment_git_timeout_seconds: float = Field(default=120.0, gt=0)
    # GET /v1/environments/packages/check: how long a registry is waited for, and how long
    # its answer is kept.
    environment_package_check_timeout_seconds: float = Field(default=10.0, gt=0)
    environment_package_check_cache_seconds: float = Field(default=300.0, ge=0)

    # The Memories chapter (docs/memories.md): served ("on") unless "off" (discovery then says
    # false, and its routes answer 404). "preview", its earlier name for on, is kept.
    memories: Literal["off", "on", "preview"] = "on"
    # The memory providers this server connects to, comma-separated names of the
    # uhp_server.memory_providers entry points; the first keeps a new root memory that names
    # none (docs/memory-providers.md). `mem0` needs the `.[mem0]` extra and an embedding model.
    memory_providers: str = "embedded"
    # The embedding model, `model` or `provider/model`, that memory providers embed with
    # through the configured model provider's /embeddings route; unset: no embedder.
    memory_embedding_model: str | None = None
    # The most memories one principal may create (0: no limit), so that no tenant grows a
    # tree without bound (docs/memories.md#limits).
    memory_max_per_principal: int = Field(default=10000, ge=0)

    # The docker sandbox (UHP_SANDBOX=docker; README: "Docker sandbox"). Limits apply per turn.
    docker_image: str = ""  # empty: the runtime image this version builds (images build)
    docker_base_image: str = "debian:bookworm-slim"  # FROM of the runtime image recipe
    docker_user: str = "auto"  # uid:gid, as local_sandbox_user (agent_uid_range under root)
    docker_memory: str = "4g"  # memory limit (no swap beyond it)
    docker_cpus: float = 2.0  # CPU limit, in cores
    docker_pids_limit: int = 512  # processes and threads
    docker_tmp_size: str = "512m"  # the writable /tmp (the root filesystem is read-only)
    # The engine's runtime for agent containers: empty, the engine's default (runc); `runsc`,
    # gVisor, a user-space kernel between the agent and the host's (docs/gvisor.md). Every
    # engine must have it registered: the server does not start on one that lacks it.
    docker_runtime: str = ""
    # Engines the turns spread over: comma-separated unix://, tcp://, ssh:// urls
    # (docs/docker.md); empty: the one engine DOCKER_HOST names (default socket).
    docker_hosts: str = ""
    docker_host_max_turns: int = Field(default=0, ge=0)  # turns per engine at once; 0: no cap
    # Ready containers kept started ahead per engine and agent uid, each bound to one turn when
    # it starts and removed after it (docs/docker.md, "Ready pool"); 0: every turn creates its own.
    docker_ready_pool: int = Field(default=2, ge=0)

    # Model upstreams, the conventional way.
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "UHP_OPENAI_API_KEY")
    )
    openai_base_url: str = Field(
        default="https://api.openai.com/v1",
        validation_alias=AliasChoices("OPENAI_BASE_URL", "UHP_OPENAI_BASE_URL"),
    )
    openai_default_model: str | None = None  # UHP_OPENAI_DEFAULT_MODEL; else the first listed
    anthropic_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_API_KEY", "UHP_ANTHROPIC_API_KEY"),
    )
    anthropic_base_url: str = Field(
        default="https://api.anthropic.com",
        validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "UHP_ANTHROPIC_BASE_URL"),
    )
    anthropic_default_model: str | None = None
    # Which API the OPENAI_BASE_URL provider serves: "responses" (the OpenAI platform: the
    # Responses API and Chat Completions) or "chat" (Chat Completions only: vLLM, Ollama, …).
    openai_api: Literal["responses", "chat"] = "responses"
    # Static model lists (comma-separated) for endpoints without a models route.
    openai_models: str | None = None
    anthropic_models: str | None = None
    providers_file: Path | None = None  # several named providers (YAML or TOML)
    # Per-turn model connections on private or loopback addresses; link-local stays refused.
    model_connection_allow_private_hosts: bool = False
    # Front doors (docs/doors/README.md): turns running their sandbox at once (the others
    # wait in order, reported queued); how long a turn paused on a question keeps its process.
    max_concurrent_turns: int = Field(default_factory=default_max_concurrent_turns, ge=1)
    # The most of those one principal holds at once (unset: one less than the limit, so one
    # principal's flood always leaves a slot to another; engine/turns/admission.py).
    max_turns_per_principal: int | None = Field(default=None, ge=1)
    # Several replicas on one PostgreSQL (docs/scale-out.md): this process's id (unset:
    # the id kept in the data directory, so replicas sharing one must each set their own), and
    # how long a replica's lease lasts without a renewal before the others take over its turns.
    # (The id names a folder: it starts with a letter or digit, so it is never "." or "..".)
    replica_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    replica_lease_seconds: float = Field(default=15.0, ge=1)
    paused_turn_keep_seconds: float = Field(default=45.0, ge=0)
    # Bearer token GET /metrics requires; unset: /metrics is open, like /healthz
    # (docs/operations.md). Set it whenever the port is reachable by anyone who must not see the
    # counts.
    metrics_token: str | None = None

    @property
    def enabled_bases(self) -> list[str] | None:
        """The bases UHP_BASES names, or None when it is unset (every installed base)."""
        if self.bases is None:
            return None
        return [b.strip() for b in self.bases.split(",") if b.strip()]

    @property
    def max_json_body_bytes(self) -> int:
        return self.max_request_bytes or self.max_file_bytes * 4 // 3 + 1024 * 1024

    @property
    def db_path(self) -> Path:
        return self.data_dir / "uhp.sqlite3"

    @property
    def database(self) -> Path | str:
        """What storage.db.Database opens: UHP_DATABASE_URL, else the SQLite file."""
        return self.database_url or self.db_path

    @property
    def sessions_dir(self) -> Path:
        return self.data_dir / "sessions"

    @property
    def blobs_dir(self) -> Path:
        return self.data_dir / "blobs"

    @property
    def previews_dir(self) -> Path:
        return self.data_dir / "previews"

    @property
    def environments_dir(self) -> Path:
        return self.data_dir / "environments"


@lru_cache
def get_settings() -> Settings:
    return Settings()
