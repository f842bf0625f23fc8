"""ClineBase: Cline's CLI (`cline`, npm) as a UHP harness base, driven over ACP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness_bases.acp import AcpBase
from harness_bases.base import SYSTEM_PATH, CliPin, Enforcement, Invocation, TurnSpec
from harness_bases.cline import config
from harness_bases.cline import install as installer
from harness_bases.cline.parser import ClineParser
from harness_bases.jsonrpc import RpcConnection


class ClineBase(AcpBase):
    name = "cline"
    label = "Cline"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (config.CONFIG_DIR, ".agents", ".clinerules")
    # Its sessions (one folder each), their databases, its logs and per-workspace chats.
    conversation_paths = tuple(
        f"{config.CONFIG_DIR}/data/{path}" for path in ("sessions", "db", "logs", "workspaces")
    )
    runtime_packages = ()  # a native binary; its commands run with the image's bash
    host_packages = ("nodejs", "npm")  # npm fetches it
    # Cline has no per-tool switch here: a disabled tool is a standing instruction. No step
    # limit: the engine counts.
    enforcement = Enforcement(disabled_tools="instruction", max_step="counted")
    # The pinned ACP server keeps a session's `mcpServers` but connects none of them.
    mcp_transports = ()
    # Not in the default set while the lead weighs its CI cost: UHP_BASES names it.
    enabled_by_default = False

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        config.write_turn_files(turn, installer.scrub_path(turn.paths.tools))
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": turn.paths.home,
            # The provider and its key: the ACP server takes an API key only from here (or
            # its own sign-in), and the provider's base URL from providers.json.
            "CLINE_PROVIDER": config.PROVIDER_ID,
            "CLINE_MODEL": turn.model,
            "CLINE_API_KEY": turn.gateway_token,
            # Every command's bash reads this (or ~/.bashrc, config.py) first: it drops the
            # key (scrub.sh).
            "BASH_ENV": installer.scrub_path(turn.paths.tools),
            # Sessions run in this process, not in a hub daemon that outlives the turn.
            "CLINE_SESSION_BACKEND_MODE": "local",
            "CLINE_NO_AUTO_UPDATE": "1",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        argv = [installer.binary_path(turn.paths.tools), "--acp"]
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def acp_mcp_servers(self, turn: TurnSpec) -> list[dict[str, Any]]:
        return []  # none reach it (mcp_transports is empty: a harness naming one is refused)

    async def session_opened(self, rpc: RpcConnection, session_id: str, turn: TurnSpec) -> None:
        """Choose the turn's model: Cline takes `CLINE_MODEL` only when its own catalogue of
        the provider lists it, and the gateway's models are not in it."""
        params = {"sessionId": session_id, "configId": "model", "value": turn.model}
        await rpc.call("session/set_config_option", params)

    def acp_parser(self, turn: TurnSpec) -> ClineParser:
        return ClineParser(max_step=turn.max_step)
