"""AcpBase: a harness base whose CLI speaks ACP on stdio.

A subclass declares what every base declares (see harness_bases/base.py), installs its CLI,
writes its config in `prepare`, and overrides a hook below only where its agent differs.
"""

from __future__ import annotations

from typing import Any

from harness_bases import events as ev
from harness_bases.acp import replies
from harness_bases.acp.driver import AcpTurn
from harness_bases.acp.parser import AcpParser
from harness_bases.base import HarnessBase, Process, TurnSpec
from harness_bases.jsonrpc import RpcConnection
from harness_bases.turns import AgentTurn


class AcpBase(HarnessBase):
    def start_turn(self, proc: Process, turn: TurnSpec) -> AcpTurn:
        return AcpTurn(self, proc, turn)

    def continue_turn(self, previous: AgentTurn, turn: TurnSpec) -> AcpTurn | None:
        """The next `session/prompt` on the same agent and session (for a subclass that sets
        `keeps_warm`: one whose agent was seen to hold several prompts cleanly)."""
        return AcpTurn.after(previous, turn) if isinstance(previous, AcpTurn) else None

    # -- hooks: what an agent may do differently -------------------------------------------
    @property
    def log_name(self) -> str:
        """Prefix of this base's log events, e.g. `hermes_prompt_error`."""
        return self.name.replace("-", "_")

    def acp_client_info(self) -> dict[str, str]:
        return {"name": "uhp-server", "title": "UHP Server", "version": self.cli_version}

    def acp_parser(self, turn: TurnSpec) -> AcpParser:
        """The parser for one turn's updates and answer."""
        return AcpParser(max_step=turn.max_step)

    def acp_mcp_servers(self, turn: TurnSpec) -> list[dict[str, Any]]:
        """`mcpServers` for session/new and session/load, for an agent that takes them
        through ACP: the gateway's MCP proxy routes (HTTP transport, bearer header), then the
        plugins' stdio servers (the launcher's command line, plugin_folders.py; ACP's stdio
        entry has no `type`, and an agent may read any `type` as a remote server). An agent
        that reads them from its own config file returns []."""
        remote = [
            {
                "type": "sse" if server.transport == "sse" else "http",
                "name": server.name,
                "url": server.url,
                "headers": [{"name": "Authorization", "value": f"Bearer {server.bearer_token}"}],
            }
            for server in turn.mcp_servers
        ]
        stdio = [
            {"name": server.name, "command": server.command, "args": list(server.args), "env": []}
            for server in turn.stdio_servers
        ]
        return remote + stdio

    def offered_mcp_servers(
        self, turn: TurnSpec, capabilities: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[ev.Notice]]:
        """`mcpServers` for this agent, given the capabilities its `initialize` answer
        advertised, and notices for servers left out. Default: `acp_mcp_servers` whole."""
        return self.acp_mcp_servers(turn), []

    async def session_opened(self, rpc: RpcConnection, session_id: str, turn: TurnSpec) -> None:
        """Called once the turn's session is open (new or loaded), before the prompt: for an
        agent that takes part of its setup only through ACP (e.g. the session's model). An
        RpcError fails the turn's start."""

    def session_loaded(self, result: Any) -> bool:
        """Whether a `session/load` answer (not an error) means the session was loaded."""
        return True

    def session_notices(self, result: Any) -> list[ev.Notice]:
        """Notices from a session/new or session/load answer (e.g. MCP servers that failed)."""
        return []

    async def after_failed_prompt(self, rpc: RpcConnection, session_id: str) -> None:
        """Called when `session/prompt` was answered with an error, while the agent still
        runs: e.g. to take the failed prompt out of the conversation."""

    async def answer_request(
        self, method: str, params: dict[str, Any], turn: TurnSpec
    ) -> dict[str, Any] | None:
        """The answer to a request from the agent; None answers "method not found". An agent
        whose own question tool reaches us as a request answers it here (turn.ask_user)."""
        return self.reply_for(method, params)

    def reply_for(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to a request that needs no one (permissions); None: "method not found"."""
        return replies.reply_for(method, params)
