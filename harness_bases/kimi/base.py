"""KimiBase: Kimi CLI (`kimi-cli`, PyPI) as a UHP harness base, driven over ACP."""

from __future__ import annotations

import json
from pathlib import Path

from harness_bases import python_runtime
from harness_bases.acp import AcpBase
from harness_bases.base import SYSTEM_PATH, CliPin, Enforcement, Invocation, TurnSpec
from harness_bases.kimi import config
from harness_bases.kimi import install as installer
from harness_bases.kimi.acp_launcher import AGENT_FILE_ENV, DISABLED_TOOLS_ENV, TOKEN_ENV
from harness_bases.kimi.parser import KimiParser


class KimiBase(AcpBase):
    name = "kimi"
    label = "Kimi CLI"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("pypi", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (config.SHARE_DIR,)
    # Its sessions (context, wire log, state) and its logs.
    conversation_paths = (f"{config.SHARE_DIR}/sessions", f"{config.SHARE_DIR}/logs")
    # Its private CPython is a copy of the host's, linked against Debian's libraries; its Grep
    # tool runs `rg` (it would download one otherwise).
    runtime_packages = ("ripgrep", *python_runtime.RUNTIME_LIBRARIES)
    host_packages = ("ripgrep",)
    # A disabled tool is never added to any of its toolsets (acp_launcher.py): not offered,
    # a call to it answered "tool not found". No step flag: the engine counts.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # Its MCP servers come through ACP (session/new `mcpServers`, the AcpBase default):
    # Streamable HTTP. A plugin's stdio server runs outside a sandbox (tests/test_kimi_base.py)
    # but its turn failed inside the local one (tests/test_harnesses_e2e.py), not yet
    # understood: such a plugin is refused for this base until it is.
    mcp_transports = ("http",)
    stdio_mcp = False
    enabled_by_default = False

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
            "KIMI_SHARE_DIR": config.share_dir(home),
            TOKEN_ENV: turn.gateway_token,
            AGENT_FILE_ENV: config.agent_file(home),
            DISABLED_TOOLS_ENV: json.dumps(list(turn.disabled_tools)),
            "KIMI_DISABLE_TELEMETRY": "1",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        argv = installer.command(turn.paths.tools)
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def acp_parser(self, turn: TurnSpec) -> KimiParser:
        return KimiParser(max_step=turn.max_step)
