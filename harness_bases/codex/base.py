"""CodexBase: the Codex CLI (`@openai/codex`) as a UHP harness base."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from harness_bases import events as ev
from harness_bases.base import Enforcement, HarnessBase, Invocation, Process, TurnSpec
from harness_bases.codex import install as installer
from harness_bases.codex.config import TOKEN_ENV, write_config
from harness_bases.codex.driver import LiveTurn, answer_request, drive_turn
from harness_bases.codex.rpc import RpcConnection
from harness_bases.codex.safe_files import real_dir
from harness_bases.codex.skills import materialise_skills

log = logging.getLogger(__name__)

# The sandbox's system folders (the engine's sandboxes bind the usual Linux layout).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class CodexBase(HarnessBase):
    name = "codex"
    label = "Codex"
    backend = "openai"
    cli_version = installer.CLI_VERSION
    # No per-tool block for built-in tools and no step flag: disabled tools are an
    # instruction, and the engine counts tool calls and stops the turn.
    enforcement = Enforcement(disabled_tools="instruction", max_step="counted")
    mcp_transports = ("http",)  # Codex's MCP client speaks Streamable HTTP only

    def __init__(self) -> None:
        # One base instance serves every session; live turns are keyed by their process.
        self._live: dict[int, LiveTurn] = {}

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

    async def drive(self, proc: Process, turn: TurnSpec) -> AsyncIterator[ev.AgentEvent]:
        live = LiveTurn(RpcConnection(proc, answer_request))
        self._live[id(proc)] = live
        try:
            async with contextlib.aclosing(drive_turn(proc, turn, live)) as events:
                async for event in events:
                    yield event
        finally:
            if self._live.get(id(proc)) is live:
                del self._live[id(proc)]

    async def interrupt(self, proc: Process) -> bool:
        live = self._live.get(id(proc))
        if live is None:
            return False
        try:
            return await live.interrupt()
        except Exception:
            log.warning("codex_interrupt_failed", exc_info=True)
            return False
