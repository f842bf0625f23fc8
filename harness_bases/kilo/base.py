"""KiloBase: Kilo Code CLI (`@kilocode/cli`, npm) as a UHP harness base, driven over ACP."""

from __future__ import annotations

import secrets
from pathlib import Path

from harness_bases.acp import AcpBase
from harness_bases.acp.opencode_family import OpenCodeFamilyParser
from harness_bases.base import SYSTEM_PATH, CliPin, Enforcement, Invocation, TurnSpec
from harness_bases.kilo import config
from harness_bases.kilo import install as installer


class KiloBase(AcpBase):
    name = "kilo"
    label = "Kilo Code"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (".kilo", ".kilocode")
    # XDG_DATA_HOME's kilo.db (sessions, messages) with its storage, logs and repos, and
    # XDG_STATE_HOME's prompt history and sandbox policies.
    conversation_paths = (".local/share/kilo", ".local/state/kilo")
    # A native binary; its search and skill tools run `rg` (it would download one otherwise).
    runtime_packages = ("ripgrep",)
    host_packages = ("nodejs", "npm", "ripgrep")  # npm fetches it
    # A disabled tool is denied in kilo.json: it leaves the model's tool list and a call to it
    # is refused. No step flag: the engine counts.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # Its MCP servers come through ACP (session/new `mcpServers`, the AcpBase default): a
    # remote one becomes a `remote` server of its config, a plugin's stdio one a `local` one.
    mcp_transports = ("http",)
    stdio_mcp = True
    # Not in the default set while the lead weighs its CI cost: UHP_BASES names it.
    enabled_by_default = False

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        config.write_turn_files(turn)
        home = turn.paths.home
        folder = config.config_dir(home)
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": home,
            "XDG_CONFIG_HOME": f"{home}/{config.CONFIG_HOME}",
            "XDG_DATA_HOME": f"{home}/{config.DATA_HOME}",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_STATE_HOME": f"{home}/{config.STATE_HOME}",
            "KILO_CONFIG": f"{folder}/{config.CONFIG_FILE}",
            "KILO_MODELS_PATH": f"{folder}/{config.MODELS_FILE}",
            config.TOKEN_ENV: turn.gateway_token,
            "SHELL": installer.shell_path(turn.paths.tools),  # drops UHP_* for commands
            # `kilo acp` serves its own HTTP API on a loopback port, which the local sandbox
            # shares with the host: only this process may use it.
            "KILO_SERVER_PASSWORD": secrets.token_urlsafe(24),
            # One process, nothing online behind the agent's back, nothing read from the
            # user's other agents.
            "KILO_NO_DAEMON": "1",
            "KILO_DISABLE_AUTOUPDATE": "1",
            "KILO_DISABLE_MODELS_FETCH": "1",
            "KILO_DISABLE_DEFAULT_PLUGINS": "1",
            "KILO_DISABLE_LSP_DOWNLOAD": "1",
            "KILO_DISABLE_SHARE": "1",
            "KILO_DISABLE_SESSION_INGEST": "1",
            "KILO_DISABLE_CODEBASE_INDEXING": "1",
            "KILO_DISABLE_PRESENCE": "1",
            "KILO_DISABLE_CLAUDE_CODE": "1",
            "KILO_DISABLE_EXTERNAL_SKILLS": "1",
            "KILO_TELEMETRY_LEVEL": "off",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        argv = [installer.binary_path(turn.paths.tools), "acp", "--pure"]
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def acp_parser(self, turn: TurnSpec) -> OpenCodeFamilyParser:
        return OpenCodeFamilyParser(max_step=turn.max_step)
