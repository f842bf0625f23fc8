"""OpenHandsBase: OpenHands CLI (`openhands`, PyPI) as a UHP harness base, driven over ACP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness_bases.acp import AcpBase
from harness_bases.base import SYSTEM_PATH, CliPin, Enforcement, Invocation, TurnSpec
from harness_bases.openhands import config
from harness_bases.openhands import install as installer
from harness_bases.openhands.parser import OpenHandsParser


class OpenHandsBase(AcpBase):
    name = "openhands"
    label = "OpenHands"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("pypi", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (config.OPENHANDS_DIR,)
    # Each conversation's folder: its state, events and the commands' saved output.
    conversation_paths = (config.CONVERSATIONS_DIR,)
    # Its private Python is in the tools folder; the shared libraries its standard modules link
    # (libssl3, libsqlite3, libffi8, …) come with the python3 every runtime image has.
    runtime_packages = ()
    host_packages = ()  # a host CPython >= 3.12 is found, not installed (python_runtime.py)
    # A disabled tool is filtered out of what the model is offered (the SDK's tool filter), and
    # a call to it is refused as an unknown tool. No step limit of its own: the engine counts.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # Its MCP servers are in the launcher's turn file (the pinned ACP server drops those of a
    # loaded session), HTTP and SSE; a plugin's stdio servers beside them.
    mcp_transports = ("http", "sse")
    stdio_mcp = True
    enabled_by_default = False

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        config.write_turn_files(turn)
        folder = config.openhands_dir(turn.paths.home)
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": turn.paths.home,
            "OPENHANDS_PERSISTENCE_DIR": folder,
            "UHP_OPENHANDS_TURN": f"{folder}/{config.TURN_FILE}",
            config.TOKEN_ENV: turn.gateway_token,
            "INPUTRC": f"{folder}/{config.INPUTRC_FILE}",
            # Nothing online behind the agent's back: LiteLLM's price list from its own copy.
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OPENHANDS_SUPPRESS_BANNER": "1",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        for index, server in enumerate(turn.mcp_servers):
            env[config.mcp_token_env(index)] = server.bearer_token
        return Invocation(
            argv=installer.command(turn.paths.tools), env=env, cwd=turn.paths.workspace
        )

    def acp_parser(self, turn: TurnSpec) -> OpenHandsParser:
        return OpenHandsParser(max_step=turn.max_step)

    def acp_mcp_servers(self, turn: TurnSpec) -> list[dict[str, Any]]:
        return []  # in the turn file, where the launcher reads their tokens from the environment
