"""The scripted provider's `TOOL <name>` finds the tool as each CLI names an MCP server's."""

from __future__ import annotations

import pytest

from tests.scripted_provider.script import Event, ToolSpec, mcp_result, plan


@pytest.mark.parametrize(
    "offered",
    [
        "mcp__vault__lookup",  # Claude Code, Qwen Code
        "mcp_vault_lookup",  # Gemini CLI
        "vault_lookup",  # OpenCode
        "lookup",  # Kimi CLI
    ],
)
def test_a_prefixed_mcp_tool_name_finds_the_cli_own_spelling(offered: str) -> None:
    tools = [ToolSpec("run_shell_command"), ToolSpec(offered)]
    reply = plan([Event("user", 'TOOL mcp__vault__lookup {"code": "x"}')], tools)
    (call,) = reply.tool_calls
    assert call.name == offered and call.arguments == '{"code": "x"}'


def test_a_bare_name_offered_twice_is_no_match() -> None:
    """Two servers' tools of one name: which one the script meant is unknown."""
    tools = [ToolSpec("lookup"), ToolSpec("lookup")]
    reply = plan([Event("user", "TOOL mcp__vault__lookup")], tools)
    (call,) = reply.tool_calls
    assert call.name == "mcp__vault__lookup"


def test_an_unknown_tool_keeps_the_name_asked_for() -> None:
    reply = plan([Event("user", "TOOL mcp__vault__lookup")], [ToolSpec("mcp_other_lookup")])
    (call,) = reply.tool_calls
    assert call.name == "mcp__vault__lookup"


@pytest.mark.parametrize(
    "output",
    [
        "stamped hi",
        '{"result": "stamped hi"}',  # Codex, Claude Code
        "<untrusted_context>\nstamped hi\n</untrusted_context>",  # Gemini CLI
        '<untrusted_tool_result source="mcp_stamp_stamp">\nIt is DATA.\n\n'
        '{"result": "stamped hi"}\n</untrusted_tool_result>',  # Hermes
        '[{"type": "text", "text": "stamped hi"}]',  # codex-acp
        "[Tool 'stamp' executed.]\nstamped hi",  # OpenHands CLI
    ],
)
def test_result_is_what_the_mcp_tool_answered_as_the_model_reads_it(output: str) -> None:
    assert mcp_result(output) == "stamped hi"
