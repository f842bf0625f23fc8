"""CopilotBase: GitHub Copilot CLI (`@github/copilot`, npm) as a UHP harness base."""

from __future__ import annotations

from pathlib import Path

from harness_bases import events as ev
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
from harness_bases.copilot import config
from harness_bases.copilot import install as installer
from harness_bases.copilot.parser import CopilotParser
from harness_bases.json_lines import PromptedTurn
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.python_start import python_argv

TOKEN_ENV = "COPILOT_PROVIDER_BEARER_TOKEN"


class CopilotBase(HarnessBase):
    name = "copilot"
    label = "GitHub Copilot CLI"
    backend = "openai"
    wire = "chat"  # its BYOK "openai" provider speaks Chat Completions
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (config.HOME_DIR,)  # in the agent home; its package cache is ~/.cache
    # Its sessions (events and workspace state per conversation), their index, its logs,
    # and its command history.
    conversation_paths = (
        f"{config.HOME_DIR}/{config.SESSIONS_DIR}",
        f"{config.HOME_DIR}/session-store.db",
        f"{config.HOME_DIR}/session-store.db-*",
        f"{config.HOME_DIR}/logs",
        f"{config.HOME_DIR}/command-history-state.json",
    )
    runtime_packages = ("python3",)  # the launcher runs on Debian's python3
    host_packages = ("nodejs", "npm")  # npm fetches it
    # `--excluded-tools` takes a tool out of what the model is offered. No step limit of its
    # own in prompt mode: the engine counts the calls.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # Opt-in until the lead adds it to CI's default set (issue 30): UHP_BASES must name it.
    enabled_by_default = False

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def compile_cache_warmup(self, tools_root: str) -> Warmup:
        return installer.warmup(tools_root)

    def prepare(self, turn: TurnSpec) -> Invocation:
        files = config.write_turn_files(turn)
        return Invocation(
            argv=argv(turn, files), env=environment(turn, files), cwd=turn.paths.workspace
        )

    def start_turn(self, proc: Process, turn: TurnSpec) -> PromptedTurn:
        chosen = config.read_session(turn.host_home)
        opening: list[ev.AgentEvent] = []
        if chosen.get("asked") and not chosen.get("resume"):
            opening.append(ev.Notice(RESUME_FAILED_NOTICE))
        if isinstance(chosen.get("id"), str):
            opening.append(ev.NativeSession(chosen["id"]))
        return PromptedTurn(proc, turn.prompt, CopilotParser(), name="copilot", opening=opening)


def argv(turn: TurnSpec, files: config.TurnFiles) -> list[str]:
    args = [
        *python_argv(installer.SYSTEM_PYTHON),
        installer.launcher_path(turn.paths.tools),
        installer.binary_path(turn.paths.tools),
        "--output-format",
        "json",
        "--stream",
        "on",
        "--model",
        turn.model,
        # Nobody approves anything: every tool and path is allowed, the sandbox is the bound.
        "--allow-all-tools",
        "--allow-all-paths",
        "--disable-builtin-mcps",
        "--no-auto-update",
        "--disable-client-telemetry",
        # The turn's credentials never reach a command or an MCP server it starts.
        f"--secret-env-vars={TOKEN_ENV}",
    ]
    args.append(
        f"--resume={files.session_id}" if files.resume else f"--session-id={files.session_id}"
    )
    # Its own ask_user has nobody to ask in prompt mode; questions go through the server's
    # ask_user MCP server, which the engine adds when the door can take one.
    args.append("--no-ask-user")
    if files.mcp_config:
        args.append(f"--additional-mcp-config=@{files.mcp_config}")
    for image in turn.images:  # shown to the model with the prompt
        args.append(f"--attachment={image.path}")
    if turn.disabled_tools:
        args.append(f"--excluded-tools={','.join(turn.disabled_tools)}")
    return args


def environment(turn: TurnSpec, files: config.TurnFiles) -> dict[str, str]:
    return {
        "PATH": SYSTEM_PATH,
        "HOME": turn.paths.home,
        "COPILOT_HOME": files.home_dir,
        "COPILOT_PROVIDER_BASE_URL": turn.gateway_url,
        "COPILOT_PROVIDER_TYPE": "openai",
        TOKEN_ENV: turn.gateway_token,
        "COPILOT_MODEL": turn.model,
        "COPILOT_CUSTOM_INSTRUCTIONS_DIRS": files.instructions_dir,
        "COPILOT_CLI_DIST_DIR": installer.dist_dir(turn.paths.tools),
        **installer.QUIET_ENV,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
