"""CodexBase: the Codex CLI (`@openai/codex`) as a UHP harness base."""

from __future__ import annotations

from pathlib import Path

from harness_bases.base import (
    SYSTEM_PATH,
    CliPin,
    Enforcement,
    HarnessBase,
    Invocation,
    Process,
    TurnSpec,
)
from harness_bases.codex import install as installer
from harness_bases.codex.config import TOKEN_ENV, write_config
from harness_bases.codex.driver import CodexTurn
from harness_bases.codex.skills import materialise_skills
from harness_bases.safe_files import real_dir
from harness_bases.turns import AgentTurn


class CodexBase(HarnessBase):
    name = "codex"
    label = "Codex"
    backend = "openai"
    wire = "responses"
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (".codex",)
    # Rollouts (the transcripts resume reads), the thread index and history databases, logs.
    conversation_paths = (
        ".codex/sessions",
        ".codex/archived_sessions",
        ".codex/history.jsonl",
        ".codex/log",
        ".codex/*.sqlite",
        ".codex/*.sqlite-*",
    )
    runtime_packages = ()  # a static binary: the image's common tools are all it runs
    host_packages = ("nodejs", "npm")  # npm fetches it
    # No per-tool block for built-in tools and no step flag: disabled tools are an
    # instruction, and the engine counts tool calls and stops the turn.
    enforcement = Enforcement(disabled_tools="instruction", max_step="counted")
    mcp_transports = ("http",)  # Codex's MCP client speaks Streamable HTTP only
    stdio_mcp = True  # and starts a plugin's stdio servers itself (config.py)
    keeps_warm = True  # app-server holds the thread: the next turn/start goes on in it

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        codex_home = real_dir(turn.host_home, ".codex")  # never a link the agent left
        ask_user = turn.ask_user is not None
        write_config(
            codex_home,
            turn.model,
            turn.gateway_url,
            turn.mcp_servers,
            ask_user,
            turn.stdio_servers,
        )
        materialise_skills(codex_home, turn.skills)
        home = turn.paths.home
        env = {
            "PATH": f"{installer.helper_path_dir(turn.paths.tools)}:{SYSTEM_PATH}",
            "HOME": home,
            "CODEX_HOME": f"{home}/.codex",
            TOKEN_ENV: turn.gateway_token,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        argv = [installer.binary_path(turn.paths.tools), "app-server"]
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def start_turn(self, proc: Process, turn: TurnSpec) -> CodexTurn:
        return CodexTurn(proc, turn)

    def continue_turn(self, previous: AgentTurn, turn: TurnSpec) -> CodexTurn | None:
        return CodexTurn.after(previous, turn) if isinstance(previous, CodexTurn) else None
