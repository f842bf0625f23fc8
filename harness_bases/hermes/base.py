"""HermesBase: Hermes Agent (`hermes-agent`, PyPI) as a UHP harness base."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.acp import AcpBase
from harness_bases.base import SYSTEM_PATH, CliPin, Enforcement, Invocation, TurnSpec
from harness_bases.hermes import config, questions
from harness_bases.hermes import install as installer
from harness_bases.hermes.acp_launcher import CLARIFY_ENV, INSTRUCTIONS_ENV
from harness_bases.hermes.parser import HermesParser, mcp_notices
from harness_bases.python_start import python_argv


class HermesBase(AcpBase):
    name = "hermes"
    label = "Hermes Agent"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("pypi", "hermes-agent", installer.CLI_VERSION),)
    state_dirs = (config.HERMES_DIR,)
    # The sessions database (and its WAL), session files, logs and its memories.
    conversation_paths = tuple(
        f"{config.HERMES_DIR}/{path}"
        for path in ("state.db", "state.db-*", "sessions", "logs", "memories")
    )
    runtime_packages = ("python3",)  # its venv runs on Debian's python3
    host_packages = ("python3-venv",)  # the venv is made with Debian's /usr/bin/python3
    # Hermes blocks whole toolsets, not single tools: disabled tools are an instruction.
    # The step budget is Hermes' own `agent.max_turns` (max_step + 1 model calls, which it
    # reports reaching); the engine's count stops the tool call past it, as for every base.
    enforcement = Enforcement(disabled_tools="instruction", max_step="native")
    # Its MCP servers are in config.yaml (see config.py); a plugin's stdio servers are there
    # too, processes it starts with its own short list of safe variables.
    stdio_mcp = True

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        config.write_turn_files(turn)
        home = config.hermes_home(turn.paths.home)
        env = {
            # Hermes puts its own interpreter's folder first on its commands' PATH unless that
            # folder is on PATH already: there, last, so that a command's `python3` stays the
            # system's, or an environment's (uhp_server/environments/turn.py), never Hermes'.
            "PATH": f"{SYSTEM_PATH}:{installer.prefix(turn.paths.tools)}/venv/bin",
            "HOME": turn.paths.home,
            "HERMES_HOME": home,
            config.TOKEN_ENV: turn.gateway_token,
            INSTRUCTIONS_ENV: f"{home}/{config.INSTRUCTIONS_FILE}",
            "HERMES_DISABLE_LAZY_INSTALLS": "1",  # never pip-install anything mid-turn
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        if turn.ask_user is not None:
            env[CLARIFY_ENV] = "1"  # Hermes' own `clarify` asks through us
        for index, server in enumerate(turn.mcp_servers):
            env[config.mcp_token_env(index)] = server.bearer_token
        argv = python_argv(
            installer.python_path(turn.paths.tools), installer.launcher_path(turn.paths.tools)
        )
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    # -- Hermes' ACP quirks (see acp_launcher.py) -----------------------------------------
    def acp_parser(self, turn: TurnSpec) -> HermesParser:
        return HermesParser(max_step=turn.max_step)

    def acp_mcp_servers(self, turn: TurnSpec) -> list[dict[str, Any]]:
        return []  # they are in config.yaml, where Hermes expands the tokens itself

    def session_loaded(self, result: Any) -> bool:
        # An unknown session is answered with an empty result (a loaded one has its modes).
        return isinstance(result, dict) and bool(result)

    def session_notices(self, result: Any) -> list[ev.Notice]:
        return mcp_notices(result)

    async def answer_request(
        self, method: str, params: dict[str, Any], turn: TurnSpec
    ) -> dict[str, Any] | None:
        if method == questions.REQUEST_METHOD and turn.ask_user is not None:
            return await questions.answered(params, turn.ask_user)
        return await super().answer_request(method, params, turn)
