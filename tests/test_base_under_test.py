"""What the end-to-end files ask of the base under test (tests/support/base_under_test.py)
comes from the bases' own declarations, and an `acp` pass names its agent everywhere."""

from __future__ import annotations

import pytest

from tests.support import base_under_test
from tests.support.acp_agents import AGENTS
from tests.support.base_under_test import BaseUnderTest, BaseUnderTestError
from uhp_server.engine.turns.questions import TEXT_MARKER


def test_a_base_with_no_mcp_client_asks_in_its_text_and_runs_no_plugin_server() -> None:
    mini = BaseUnderTest("mini-swe-agent")
    assert (mini.speaks_mcp, mini.starts_stdio_servers, mini.asks_in_text) == (False, False, True)
    assert mini.asking("TOOL ask_user {}", "Which?", "SAY {output}") == f"SAY {TEXT_MARKER} Which?"
    copilot = BaseUnderTest("copilot")  # MCP over HTTP, no stdio servers
    assert (copilot.speaks_mcp, copilot.starts_stdio_servers) == (True, False)
    codex = BaseUnderTest("codex")
    assert codex.asking("TOOL ask_user {}", "Which?", "SAY {output}") == (
        "TOOL ask_user {}\nSAY {output}"
    )
    assert codex.harness(name="x") == {"base": "codex", "name": "x"}


@pytest.mark.parametrize(
    ("agent", "backend"), [("claude-code-acp", "anthropic"), ("codex-acp", "openai")]
)
def test_an_acp_pass_runs_its_agent_on_that_agent_s_wire(agent: str, backend: str) -> None:
    acp = BaseUnderTest("acp", agent)
    assert acp.backend == backend
    assert acp.harness()["uhpserver_baseConfig"] == AGENTS[agent]
    assert acp.gateway_url_variable == AGENTS[agent]["model_access"]["base_url_env"]
    assert (
        acp.models({"openai": "gpt-test", "anthropic": "claude-test"})[backend]
        == (base_under_test.ACP_AGENT_MODELS[agent][0])
    )


def test_an_acp_pass_must_name_one_of_the_test_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UHP_TEST_BASE", "acp")
    monkeypatch.delenv("UHP_TEST_ACP_AGENT", raising=False)
    with pytest.raises(BaseUnderTestError, match="UHP_TEST_ACP_AGENT"):
        base_under_test.from_environment()
    monkeypatch.setenv("UHP_TEST_ACP_AGENT", "some-agent")
    with pytest.raises(BaseUnderTestError):
        base_under_test.from_environment()
    monkeypatch.setenv("UHP_TEST_BASE", "codex")
    monkeypatch.setenv("UHP_TEST_ACP_AGENT", "codex-acp")
    with pytest.raises(BaseUnderTestError, match="acp only"):
        base_under_test.from_environment()
