"""PiBase: the Pi coding agent (`@mariozechner/pi-coding-agent`) as a UHP harness base."""

from __future__ import annotations

from pathlib import Path

from harness_bases import node_runtime
from harness_bases.base import (
    SYSTEM_PATH,
    CliPin,
    Enforcement,
    HarnessBase,
    Invocation,
    Process,
    TurnSpec,
    Warmup,
)
from harness_bases.pi import config
from harness_bases.pi import install as installer
from harness_bases.pi.driver import PiTurn

# Pi's built-in tools that are on unless `--tools` says otherwise.
DEFAULT_TOOLS = ("read", "bash", "edit", "write")


class PiBase(HarnessBase):
    name = "pi"
    label = "Pi"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    cli_pins = (
        CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),
        CliPin("npm", node_runtime.package(), node_runtime.NODE_VERSION),
    )
    state_dirs = (".pi",)
    conversation_paths = (".pi/agent/sessions",)  # one <time>_<id>.jsonl per conversation
    runtime_packages = ()  # its own node (under the tools folder) and the image's shell tools
    host_packages = ("nodejs", "npm")  # npm fetches it
    # `--tools` is an allowlist: a disabled tool is not offered to the model and a call to it
    # is refused by Pi (proven live in tests/test_pi_base.py). Pi has no step limit of its
    # own: the engine counts the tool calls.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # Pi has no MCP client of its own: the base's extension (mcp_extension.js) speaks
    # Streamable HTTP to the gateway's MCP proxy; the legacy SSE transport is not offered.
    mcp_transports = ("http",)
    # The extension also starts a plugin's stdio servers, inside Pi and so inside the
    # sandbox, through plugin_launcher.py (config.py).
    stdio_mcp = True

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def compile_cache_warmup(self, tools_root: str) -> Warmup:
        return installer.CLI.warmup(tools_root)

    def prepare(self, turn: TurnSpec) -> Invocation:
        files = config.write_turn_files(turn)
        return Invocation(
            argv=argv(turn, files), env=environment(turn, files), cwd=turn.paths.workspace
        )

    def start_turn(self, proc: Process, turn: TurnSpec) -> PiTurn:
        return PiTurn(proc, turn.prompt, fresh_start=_fresh_start(turn), images=turn.images)


def _fresh_start(turn: TurnSpec) -> bool:
    """A session to resume that is no longer there: the turn starts a new one, visibly."""
    if turn.native_session_id is None:
        return False
    host = turn.host_home / config.AGENT_DIR
    return config.session_file(host, turn.native_session_id) is None


def argv(turn: TurnSpec, files: config.TurnFiles) -> list[str]:
    args = [
        *installer.command(turn.paths.tools),
        "--mode",
        "rpc",
        "--provider",
        config.PROVIDER,
        "--model",
        turn.model,
        "--session-dir",
        files.sessions_dir,
        # Only what this server puts in place: no extensions, prompt templates or themes
        # found in the workspace (an extension would run inside Pi itself).
        "--no-extensions",
        "--no-prompt-templates",
        "--no-themes",
    ]
    if files.mcp_config:
        args += ["--extension", installer.mcp_extension_path(turn.paths.tools)]
    if files.resume_file:
        args += ["--session", files.resume_file]
    if files.system_prompt:
        args += ["--append-system-prompt", files.system_prompt]
    if turn.disabled_tools and not files.mcp_config:  # else the MCP extension does it
        allowed = [t for t in DEFAULT_TOOLS if t not in set(turn.disabled_tools)]
        args += ["--tools", ",".join(allowed)] if allowed else ["--no-tools"]
    return args


def environment(turn: TurnSpec, files: config.TurnFiles) -> dict[str, str]:
    env = {
        "PATH": SYSTEM_PATH,
        "HOME": turn.paths.home,
        "PI_CODING_AGENT_DIR": files.agent_dir,
        config.TOKEN_ENV: turn.gateway_token,
        **installer.QUIET_ENV,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    if files.mcp_config:
        env["UHP_PI_MCP_CONFIG"] = files.mcp_config
        for index, server in enumerate(turn.mcp_servers):
            env[config.mcp_token_env(index)] = server.bearer_token
    return env
