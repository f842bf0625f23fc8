"""HermesBase: Hermes Agent (`hermes-agent`, PyPI) as a UHP harness base."""

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
from harness_bases.hermes import config
from harness_bases.hermes import install as installer
from harness_bases.hermes.acp_launcher import INSTRUCTIONS_ENV
from harness_bases.hermes.driver import LiveTurn, connect, drive_turn
from harness_bases.live_turns import LiveTurns


class HermesBase(HarnessBase):
    name = "hermes"
    label = "Hermes Agent"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    # Hermes blocks whole toolsets, not single tools: disabled tools are an instruction.
    # The step budget is Hermes' own `agent.max_turns` (max_step + 1 model calls, which it
    # reports reaching); the engine's count stops the tool call past it, as for every base.
    enforcement = Enforcement(disabled_tools="instruction", max_step="native")

    def __init__(self) -> None:
        self._live = LiveTurns[LiveTurn]("hermes")

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        config.write_turn_files(turn)
        home = config.hermes_home(turn.paths.home)
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": turn.paths.home,
            "HERMES_HOME": home,
            config.TOKEN_ENV: turn.gateway_token,
            INSTRUCTIONS_ENV: f"{home}/{config.INSTRUCTIONS_FILE}",
            "HERMES_DISABLE_LAZY_INSTALLS": "1",  # never pip-install anything mid-turn
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        for index, server in enumerate(turn.mcp_servers):
            env[config.mcp_token_env(index)] = server.bearer_token
        argv = [
            installer.python_path(turn.paths.tools),
            installer.launcher_path(turn.paths.tools),
        ]
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def drive(self, proc: Process, turn: TurnSpec) -> AsyncIterator[ev.AgentEvent]:
        live = LiveTurn(connect(proc))
        return self._live.follow(proc, live, drive_turn(proc, turn, live))

    async def interrupt(self, proc: Process) -> bool:
        return await self._live.interrupt(proc)
