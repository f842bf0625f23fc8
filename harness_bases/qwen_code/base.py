"""QwenCodeBase: Qwen Code (`@qwen-code/qwen-code`) as a UHP harness base, over ACP."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from harness_bases import node_runtime
from harness_bases.acp import AcpBase
from harness_bases.base import SYSTEM_PATH, CliPin, Enforcement, Invocation, TurnSpec, Warmup
from harness_bases.jsonrpc import ConnectionClosed, RpcConnection, RpcError
from harness_bases.qwen_code import config
from harness_bases.qwen_code import install as installer
from harness_bases.qwen_code.parser import QwenParser

log = logging.getLogger(__name__)

# An ACP extension of Qwen Code: the session's rewindable prompts, oldest first.
REWIND_SNAPSHOTS = "qwen/status/session/rewind_snapshots"


class QwenCodeBase(AcpBase):
    name = "qwen-code"
    label = "Qwen Code"
    backend = "openai"
    wire = "chat"
    cli_version = installer.CLI_VERSION
    cli_pins = (
        CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),
        CliPin("npm", node_runtime.package(), node_runtime.NODE_VERSION),
    )
    state_dirs = (config.CONFIG_DIR,)
    # Per-project chats and logs under tmp/ and projects/, the shell history, debug logs.
    conversation_paths = tuple(
        f"{config.CONFIG_DIR}/{path}" for path in ("tmp", "projects", "history", "debug")
    )
    runtime_packages = ()  # its own node (under the tools folder) and the image's shell tools
    host_packages = ("nodejs", "npm")  # npm fetches it
    # A `permissions.deny` rule takes the tool out of the registry: not offered, a call
    # refused (proven live in tests/test_qwen_code_base.py). No step limit is used: the
    # engine counts the tool calls.
    enforcement = Enforcement(disabled_tools="hard", max_step="counted")
    # Its MCP servers are in settings.json (see config.py), Streamable HTTP only here; a
    # plugin's stdio servers are there too, processes it starts.
    mcp_transports = ("http",)
    stdio_mcp = True
    keeps_warm = True  # `qwen --acp` holds its session: the next session/prompt goes on in it

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def compile_cache_warmup(self, tools_root: str) -> Warmup:
        return installer.CLI.warmup(tools_root)

    def prepare(self, turn: TurnSpec) -> Invocation:
        config.write_turn_files(turn)
        argv = [
            *installer.command(turn.paths.tools),
            "--acp",
            "--auth-type",
            "openai",
            "--model",
            turn.model,
            "--approval-mode",
            "yolo",
        ]
        if appended := config.system_prompt(turn):
            argv += ["--append-system-prompt", appended]
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": turn.paths.home,
            config.TOKEN_ENV: turn.gateway_token,
            "BASH_ENV": config.scrub_script_path(turn.paths.home),
            # One process: no relaunch of itself with a bigger heap (it would double the
            # start-up).
            "QWEN_CODE_NO_RELAUNCH": "true",
            # MCP servers connect while the session starts, not in the background: else the
            # first model request goes out before their tools are registered.
            "QWEN_CODE_LEGACY_MCP_BLOCKING": "1",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        for index, server in enumerate(turn.mcp_servers):
            env[config.mcp_token_env(index)] = server.bearer_token
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def acp_mcp_servers(self, turn: TurnSpec) -> list[dict[str, Any]]:
        return []  # in settings.json: ACP's mcpServers cannot say `alwaysLoadTools`

    def acp_parser(self, turn: TurnSpec) -> QwenParser:
        return QwenParser(max_step=turn.max_step)

    async def after_failed_prompt(self, rpc: RpcConnection, session_id: str) -> None:
        """Rewind the conversation to before the failed prompt. Qwen Code keeps a prompt
        whose model call failed in its history (and its session file), so the next turn
        would send it again merged with the new prompt. Every prompt leaves a rewind
        snapshot; the last one still rewindable is the failed prompt's."""
        try:
            found = await rpc.call(REWIND_SNAPSHOTS, {"sessionId": session_id})
            snapshots = (found or {}).get("snapshots") or []
            if not snapshots:
                return
            target = {"targetTurnIndex": int(snapshots[-1]["turnIndex"]), "rewindFiles": False}
            await rpc.call("rewindSession", {"sessionId": session_id, **target})
        except (RpcError, ConnectionClosed, KeyError, TypeError, ValueError) as exc:
            log.warning("qwen_code_rewind_failed", extra={"error": str(exc)})
