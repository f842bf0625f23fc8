"""OpenCodeBase: OpenCode (`opencode-ai`, npm) as a UHP harness base, driven over ACP."""

from __future__ import annotations

import secrets
from pathlib import Path

from harness_bases.acp import AcpBase
from harness_bases.base import SYSTEM_PATH, CliPin, Enforcement, Invocation, TurnSpec
from harness_bases.opencode import config
from harness_bases.opencode import install as installer
from harness_bases.opencode.parser import OpenCodeParser


class OpenCodeBase(AcpBase):
    name = "opencode"
    label = "OpenCode"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (".opencode",)
    # XDG_DATA_HOME's opencode.db (sessions, messages) with its storage, logs and snapshots,
    # and XDG_STATE_HOME's prompt history.
    conversation_paths = (".local/share/opencode", ".local/state/opencode")
    # A native binary; its search and skill tools run `rg` (it would download one otherwise).
    runtime_packages = ("ripgrep",)
    host_packages = ("nodejs", "npm", "ripgrep")  # npm fetches it
    # A disabled tool is denied in opencode.json: it leaves the model's tool list and a call
    # to it is refused (tests/test_opencode_base.py). No step flag: the engine counts.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # Its MCP servers come through ACP (session/new `mcpServers`, the AcpBase default): a
    # remote one becomes a `remote` server of its config, a plugin's stdio one a `local` one,
    # a process it starts.
    mcp_transports = ("http",)
    stdio_mcp = True
    keeps_warm = True  # `opencode acp` holds its session: the next session/prompt goes on in it

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        config.write_turn_files(turn)
        home = turn.paths.home
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": home,
            "XDG_CONFIG_HOME": f"{home}/{config.CONFIG_HOME}",
            "XDG_DATA_HOME": f"{home}/{config.DATA_HOME}",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_STATE_HOME": f"{home}/.local/state",
            "OPENCODE_CONFIG": f"{config.config_dir(home)}/{config.CONFIG_FILE}",
            "OPENCODE_MODELS_PATH": f"{config.config_dir(home)}/{config.MODELS_FILE}",
            config.TOKEN_ENV: turn.gateway_token,
            "SHELL": installer.shell_path(turn.paths.tools),  # drops UHP_* for commands
            # `opencode acp` serves its own HTTP API on a loopback port, which the local
            # sandbox shares with the host: only this process may use it.
            "OPENCODE_SERVER_PASSWORD": secrets.token_urlsafe(24),
            # Nothing goes online behind the agent's back.
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        argv = [installer.binary_path(turn.paths.tools), "acp", "--pure"]
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def acp_parser(self, turn: TurnSpec) -> OpenCodeParser:
        return OpenCodeParser(max_step=turn.max_step)
