"""GeminiCliBase: Gemini CLI (`@google/gemini-cli`) as a UHP harness base, over ACP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness_bases import node_runtime
from harness_bases.acp import AcpBase
from harness_bases.base import SYSTEM_PATH, CliPin, Enforcement, Invocation, TurnSpec, Warmup
from harness_bases.gemini_cli import config, questions
from harness_bases.gemini_cli import install as installer
from harness_bases.gemini_cli.parser import GeminiParser


class GeminiCliBase(AcpBase):
    name = "gemini-cli"
    label = "Gemini CLI"
    backend = "openai"  # its calls reach the openai backend's provider, translated
    wire = "gemini"
    cli_version = installer.CLI_VERSION
    cli_pins = (
        CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),
        CliPin("npm", node_runtime.package(), node_runtime.NODE_VERSION),
    )
    state_dirs = (config.CONFIG_DIR,)
    # Per-project chats, logs and checkpoints under tmp/, and the shell history.
    conversation_paths = (f"{config.CONFIG_DIR}/tmp", f"{config.CONFIG_DIR}/history")
    runtime_packages = ()  # its own node (under the tools folder) and the image's shell tools
    host_packages = ("nodejs", "npm")  # npm fetches it
    # `tools.exclude` takes a tool out of the registry (not offered to the model); no step
    # limit is used (`maxSessionTurns` counts the whole session): the engine counts.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # Its MCP servers come through ACP (session/new `mcpServers`, the AcpBase default):
    # `http` becomes the CLI's `httpUrl` (Streamable HTTP), `sse` its `url` (HTTP+SSE).
    mcp_transports = ("http", "sse")
    # A plugin's stdio server too: a stdio entry there is a process the CLI starts.
    stdio_mcp = True
    # A failed, cancelled or parked turn is taken back out of its conversation, and one left
    # empty is deleted on exit (see HarnessBase.forgets_unfinished_turns).
    forgets_unfinished_turns = True
    # Its own `ask_user` asks through us (questions.py): the server's question tool is not
    # added to its MCP servers.
    asks_natively = True

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def compile_cache_warmup(self, tools_root: str) -> Warmup:
        return installer.CLI.warmup(tools_root)

    def prepare(self, turn: TurnSpec) -> Invocation:
        config.write_turn_files(turn)
        node, cli = installer.command(turn.paths.tools)
        hook = config.acp_fixes_path(turn.paths.home)
        argv = [
            node,
            "--import",
            f"file://{hook}",
            cli,
            "--acp",
            "--model",
            turn.model,
            "--approval-mode",
            "yolo",
        ]
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": turn.paths.home,
            config.TOKEN_ENV: turn.gateway_token,
            # The SDK appends `v1beta/models/…` to it: the gateway serves the Gemini API there.
            config.BASE_URL_ENV: turn.gateway_url,
            "BASH_ENV": config.scrub_script_path(turn.paths.home),
            **installer.NO_RELAUNCH,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        if turn.ask_user is not None:
            env[questions.ASK_USER_ENV] = "1"
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def acp_parser(self, turn: TurnSpec) -> GeminiParser:
        return GeminiParser(max_step=turn.max_step)

    async def answer_request(
        self, method: str, params: dict[str, Any], turn: TurnSpec
    ) -> dict[str, Any] | None:
        if method == questions.REQUEST_METHOD and turn.ask_user is not None:
            return await questions.answered(params, turn.ask_user)
        return await super().answer_request(method, params, turn)
