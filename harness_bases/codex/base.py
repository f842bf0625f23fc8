"""CodexBase: the Codex CLI (`@openai/codex`) as a UHP harness base."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from harness_bases import events as ev
from harness_bases.base import (
    SYSTEM_PATH,
    Enforcement,
    HarnessBase,
    Invocation,
    Process,
    TurnSpec,
)
from harness_bases.codex import install as installer
from harness_bases.codex.config import TOKEN_ENV, write_config
from harness_bases.codex.driver import LiveTurn, connect, drive_turn
from harness_bases.codex.skills import materialise_skills
from harness_bases.live_turns import LiveTurns
from harness_bases.safe_files import real_dir


class CodexBase(HarnessBase):
    name = "codex"
    label = "Codex"
    backend = "openai"
    wire = "responses"
    cli_version = installer.CLI_VERSION
    # No per-tool block for built-in tools and no step flag: disabled tools are an
    # instruction, and the engine counts tool calls and stops the turn.
    enforcement = Enforcement(disabled_tools="instruction", max_step="counted")
    mcp_transports = ("http",)  # Codex's MCP client speaks Streamable HTTP only

    def __init__(self) -> None:
        self._live = LiveTurns[LiveTurn]("codex")

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        codex_home = real_dir(turn.host_home, ".codex")  # never a link the agent left
        write_config(codex_home, turn.model, turn.gateway_url, turn.mcp_servers)
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

    def drive(self, proc: Process, turn: TurnSpec) -> AsyncIterator[ev.AgentEvent]:
        live = LiveTurn(connect(proc))
        return self._live.follow(proc, live, drive_turn(proc, turn, live))

    async def interrupt(self, proc: Process) -> bool:
        return await self._live.interrupt(proc)
