"""The scripted provider's `TOOL <name>` finds the tool as each CLI names an MCP server's."""

from __future__ import annotations

import pytest

from tests.scripted_provider.script import Event, ToolSpec, plan


@pytest.mark.parametrize(
    "offered",
    [
        "mcp__vault__lookup",  # Claude Code, Qwen Code
        "mcp_vault_lookup",  # Gemini CLI
        "vault_lookup",  # OpenCode
    ],
)
def test_a_prefixed_mcp_tool_name_finds_the_cli_own_spelling(offered: str) -> None:
    tools = [ToolSpec("run_shell_command"), ToolSpec(offered)]
    reply = plan([Event("user", 'TOOL mcp__vault__lookup {"code": "x"}')], tools)
    (call,) = reply.tool_calls
    assert call.name == offered and call.arguments == '{"code": "x"}'


def test_an_unknown_tool_keeps_the_name_asked_for() -> None:
    reply = plan([Event("user", "TOOL mcp__vault__lookup")], [ToolSpec("mcp_other_lookup")])
    (call,) = reply.tool_calls
    assert call.name == "mcp__vault__lookup"
