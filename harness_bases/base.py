"""The interface every harness base implements: one folder per base under harness_bases/."""

from __future__ import annotations

import abc
from base64 import b64encode
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness_bases.turns import AgentTurn

# The sandbox's system folders for PATH (every sandbox binds the usual Linux layout).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class SandboxPaths:
    """Where the session's folders appear inside the sandbox (the same for every sandbox)."""

    workspace: str = "/workspace"
    home: str = "/home/agent"
    tools: str = "/opt/uhp-tools"


# Asks the user (question, suggested answers) through the engine's question machinery; the
# answer, or None when none came while the turn could wait (it is parked or stopping).
UserAsker = Callable[[str, tuple[str, ...]], Awaitable[str | None]]


@dataclass(frozen=True)
class ImageInput:
    """An image the user attached, placed in the workspace: the base shows it to the model
    (as the CLI's own image input) when its CLI can take one."""

    host_path: Path
    path: str  # as the CLI sees it inside the sandbox
    media_type: str

    def base64(self) -> str:
        """The image's bytes in base64 (a file read: call it off the event loop)."""
        return b64encode(self.host_path.read_bytes()).decode("ascii")


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill folder (or a plugin package); `path` is relative, already
    validated not to escape."""

    path: str
    data: bytes
    # Written runnable: a plugin's stdio server command (the wire carries no file modes; a
    # file starting with `#!` is made runnable anyway).
    executable: bool = False


@dataclass(frozen=True)
class SkillBundle:
    """A whole skill folder (it always holds a SKILL.md). Only enabled skills reach a base."""

    name: str  # a safe folder name
    files: tuple[SkillFile, ...]
    plugin: str | None = None  # the plugin it comes with; None: the harness's own or built in


@dataclass(frozen=True)
class StdioServer:
    """A stdio MCP server an enabled plugin's `mcp.json` declares, as written there:
    `${PLUGIN_ROOT}` and `${PLUGIN_DATA}` are expanded only when it is launched."""

    name: str  # sanitised, unique within the harness
    command: str  # one token: a bare name, or a path in the package beginning with `./`
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None  # None: the plugin root


@dataclass(frozen=True)
class PluginPackage:
    """An enabled plugin (Agent Plugins 1.0.0): its whole package, placed in the sandbox
    every turn (harness_bases/plugin_folders.py), and its stdio MCP servers. Its skills are in
    TurnSpec.skills and its remote MCP servers in TurnSpec.mcp_servers, with the harness's."""

    name: str  # the manifest's name: a-z, 0-9, '.' and '-'
    files: tuple[SkillFile, ...]
    stdio_servers: tuple[StdioServer, ...] = ()
    version: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class StdioServerSpec:
    """A plugin's stdio MCP server as the CLI must start it, inside the sandbox: `command`
    and `args` start the server's launcher (plugin_folders.py) on the server's launch file,
    never a string from the plugin, so that a CLI that expands `${VAR}` in its MCP config
    cannot put its own environment (the turn's credentials) into a plugin's process."""

    name: str  # sanitised, unique within the harness
    command: str
    args: tuple[str, ...]
    plugin: str  # the plugin that declares it


@dataclass(frozen=True)
class McpServerSpec:
    """An enabled MCP server as the CLI must reach it.

    `url` is the server's MCP proxy route on the model gateway, never the real endpoint: the
    gateway applies the URL policy at run time and adds the real credentials, so neither the
    endpoint's secrets nor its address reach the sandbox. The CLI authenticates to the proxy
    with the turn's gateway token as a bearer token (`bearer_token`)."""

    name: str  # sanitised, CLI-safe identifier
    url: str
    bearer_token: str
    transport: str = "http"  # "http" (Streamable HTTP) or "sse"


@dataclass(frozen=True)
class TurnSpec:
    """Everything a base needs to build one turn. Host paths are for writing config files
    before the turn; `paths` are what the CLI sees inside the sandbox."""

    prompt: str
    model: str
    gateway_url: str  # the backend's gateway base URL as seen from inside the sandbox
    # Per-turn token, the only credential in the sandbox: bound to the turn's own sandbox
    # (useless anywhere else) and revoked when the turn ends.
    gateway_token: str
    host_workspace: Path
    host_home: Path
    host_tools: Path
    paths: SandboxPaths = field(default_factory=SandboxPaths)
    native_session_id: str | None = None  # resume this CLI conversation when set
    system_prompt: str = ""  # harness systemPrompt + per-task instructions, already joined
    disabled_tools: tuple[str, ...] = ()
    max_output_tokens: int | None = None
    # The step budget, for CLIs that enforce one natively (Enforcement.max_step == "native");
    # the engine also counts tool calls and stops the turn past it, whatever the base does.
    max_step: int | None = None
    skills: tuple[SkillBundle, ...] = ()  # materialise each whole folder where the CLI looks
    mcp_servers: tuple[McpServerSpec, ...] = ()  # configure with the CLI's own MCP format
    # The enabled plugins, their packages already placed (plugin_folders.place_plugins), and
    # their stdio MCP servers: configure each with the CLI's own MCP format too.
    plugins: tuple[PluginPackage, ...] = ()
    stdio_servers: tuple[StdioServerSpec, ...] = ()
    images: tuple[ImageInput, ...] = ()  # the turn's input images, already in the workspace
    # Set when the turn's door can take a question: the CLI's own question tool asks through
    # it. None: that tool behaves as the CLI's headless mode makes it (see README).
    ask_user: UserAsker | None = None


@dataclass(frozen=True)
class Invocation:
    """What to start inside the sandbox: argv, an environment built from nothing, a cwd."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


@dataclass(frozen=True)
class Warmup:
    """A start of a base's node CLI that loads its code and ends (its version command), for
    the compile cache `bases install` makes (compile_cache.py): paths as the sandbox sees
    them, and the environment beside a bare PATH and an empty home of its own."""

    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)
    exit_codes: tuple[int, ...] = (0,)  # how it ends when it did its work


class Process(Protocol):
    """A running sandboxed process, as the base's driver sees it."""

    async def write(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    def lines(self) -> AsyncIterator[bytes]:
        """stdout, one line at a time (without the newline), until EOF."""
        ...

    def stderr_tail(self) -> str: ...


class BaseConfigError(ValueError):
    """A harness's configuration of its base (`uhpserver_baseConfig`) is refused: `param` is
    the field's path inside it ("" for the whole object, "command[0]", "env.FOO")."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


# Stores a secret a base configuration holds (value, its param) and returns the reference the
# configuration keeps in its place; a reference sent back is checked and kept as it is.
SecretSealer = Callable[[str, str], str]


@dataclass(frozen=True)
class Enforcement:
    """What a base can really enforce, reported truthfully to clients."""

    disabled_tools: str  # "hard" | "instruction"
    max_step: str  # "native" | "counted"
    timeout: str = "server"


@dataclass(frozen=True)
class CliPin:
    """A package the base installs, at the exact version it was verified with."""

    registry: str  # where it comes from: "npm" | "pypi"
    package: str
    version: str


# What every base declares as class attributes; the rest of the server derives from them
# (the registry refuses a base that leaves one out, and a test checks the built-in ones).
DECLARATIONS = (
    "name",  # the protocol's `base` string, e.g. "codex"
    "label",  # baseLabel, e.g. "Codex"
    "backend",  # which gateway backend it talks to: "openai" | "anthropic"
    "wire",  # the API its CLI speaks: "responses" | "chat" | "anthropic" | "gemini"
    "cli_version",  # the pinned CLI version, as the CLI reports it
    "cli_pins",  # tuple[CliPin, ...]: the packages `install` puts under the tools folder
    "enforcement",  # Enforcement: what it really enforces
    "state_dirs",  # folder names the CLI keeps its own state in: never artifacts
    # Where in the agent home the CLI keeps its conversations (transcripts, histories, logs,
    # state databases): globs relative to the home, `*` within one path segment, each a file
    # or a whole folder. A `store: false` task leaves them as it found them
    # (uhp_server/engine/turns/unkept.py).
    "conversation_paths",
    "runtime_packages",  # Debian packages the CLI needs in the docker runtime image
    "host_packages",  # Debian packages `install` needs on the host
)


class HarnessBase(abc.ABC):
    """A CLI agent as a harness base. Registered through the `uhp_server.bases` entry point
    group (see docs/extending.md, "Adding a base"); each DECLARATIONS entry is a class
    attribute."""

    name: str
    label: str
    backend: str
    wire: str
    cli_version: str
    cli_pins: tuple[CliPin, ...]
    enforcement: Enforcement
    state_dirs: tuple[str, ...]
    conversation_paths: tuple[str, ...]
    runtime_packages: tuple[str, ...]
    host_packages: tuple[str, ...]
    honours_max_output_tokens: bool = False  # True when the CLI can cap generated tokens
    # False for a base that is registered and installable but not yet at the bar every base
    # meets (the README says what it lacks): UHP_BASES must name it to enable it.
    enabled_by_default: bool = True
    # MCP transports the CLI can speak to the gateway's MCP proxy: "http" (Streamable HTTP),
    # "sse" (legacy HTTP+SSE). Harness config naming another is refused for this base.
    mcp_transports: tuple[str, ...] = ("http", "sse")
    # True when the base starts plugins' stdio MCP servers (TurnSpec.stdio_servers) inside
    # the sandbox; a plugin declaring one is refused for a base that does not.
    stdio_mcp: bool = False
    # True when the CLI's own question tool asks through TurnSpec.ask_user: the server's
    # `ask_user` MCP server is then not added to its turns, nor the text fallback.
    asks_natively: bool = False
    # True when the CLI takes a turn stopped before it finished (failed, cancelled, parked on
    # a question) back out of its conversation, and drops a new conversation left empty
    # (Gemini CLI): the driver then reports a new session's id only once its first turn
    # finished, and an answer to a parked question repeats the request it was asked about.
    forgets_unfinished_turns: bool = False
    # True when a harness names the wire its agent speaks (`uhpserver_baseConfig`: the `acp`
    # base), `wire` being only the registered base's: any registered wire may then be used.
    harness_names_wire: bool = False
    # True when the CLI holds several turns in one process (Codex app-server threads, Claude
    # Code's stream-json input, an ACP session): a harness may then keep a session's process
    # warm between its turns (`uhpserver_keepWarmSeconds`; engine/turns/warm.py), and the
    # next turn goes on in it through `continue_turn`.
    keeps_warm: bool = False

    # -- a harness's own configuration of its base (most bases take none) ---------------------
    def parse_base_config(
        self, raw: Any, seal: SecretSealer, wires: Mapping[str, str]
    ) -> dict[str, Any] | None:
        """Validate a harness's `uhpserver_baseConfig` into the JSON object it keeps (secrets
        sealed through `seal`, only their references kept); `wires`: each registered wire's
        backend. BaseConfigError names the field that is wrong. A base that takes none refuses
        any but null."""
        if raw is None:
            return None
        raise BaseConfigError("", f"The {self.label} base takes no configuration of its own.")

    def for_harness(self, config: dict[str, Any] | None, wires: Mapping[str, str]) -> HarnessBase:
        """The base as one harness configured it (`config`: what `parse_base_config` kept,
        secrets resolved when a turn runs it), or itself for a base that takes none.
        BaseConfigError when that harness cannot run a turn (a reason for its user)."""
        return self

    @abc.abstractmethod
    def install(self, tools_dir: Path) -> None:
        """Install the pinned CLI under tools_dir (idempotent) and verify the binary runs."""

    @abc.abstractmethod
    def installed_version(self, tools_dir: Path) -> str | None:
        """The version the installed CLI reports, or None when it is not installed/runnable."""

    def compile_cache_warmup(self, tools_root: str) -> Warmup | None:
        """How to load this base's node CLI once for node's compile cache (compile_cache.py),
        paths under `tools_root`; None (the default): no node CLI, or none worth it."""
        return None

    @abc.abstractmethod
    def prepare(self, turn: TurnSpec) -> Invocation:
        """Write the CLI's config into the session's home and return how to start it."""

    @abc.abstractmethod
    def start_turn(self, proc: Process, turn: TurnSpec) -> AgentTurn:
        """The turn the started CLI runs; the engine iterates its events and may interrupt
        it. All per-turn state lives in the returned object, never on the base."""

    def continue_turn(self, previous: AgentTurn, turn: TurnSpec) -> AgentTurn | None:
        """The session's next turn in the process `previous` ran in, kept warm since its
        outcome (its stdin still open, nothing read past the outcome), on the same CLI
        conversation. `turn` was built as for a cold turn (same token: the grant is kept);
        the CLI's config is not written again, since what it reads at start is the same
        (engine/turns/warm.py's key). None: this base cannot, and the turn starts cold."""
        return None


def missing_declarations(base: object) -> list[str]:
    """The DECLARATIONS `base` (a HarnessBase instance or class) leaves out."""
    return [name for name in DECLARATIONS if not hasattr(base, name)]
