"""The wire translators with the real CLIs: Codex (Responses) and Claude Code (Anthropic
Messages) run against the scripted provider's Chat Completions route through a relay that
uses only uhp_server.gateway.wires (tests/support/wire_relay.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases import registry
from tests.conftest import PROVIDER_KEY, installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.direct_turn import DirectTurn, direct_spec, run_direct_turn
from tests.support.wire_relay import RunningRelay

CLIS = {"codex": ("gpt-test", "base_url"), "claude-code": ("claude-test", "url")}


@pytest.fixture(scope="module")
def relay(provider: RunningProvider) -> Iterator[RunningRelay]:
    running = RunningRelay(provider.base_url, PROVIDER_KEY)
    yield running
    running.stop()


async def turn(base_name: str, relay: RunningRelay, tmp_path: Path, prompt: str) -> DirectTurn:
    model, url_kind = CLIS[base_name]
    home, workspace = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    workspace.mkdir()
    spec = direct_spec(
        prompt,
        model=model,
        gateway_url=getattr(relay, url_kind),
        home=home,
        workspace=workspace,
        tools=installed_tools(base_name),
    )
    return await run_direct_turn(registry()[base_name], spec, timeout=90, exit_timeout=15)


def chat_calls(provider: RunningProvider) -> list[dict]:
    return [r for r in provider.requests() if r["path"] == "/v1/chat/completions"]


@pytest.mark.slow
@pytest.mark.parametrize("base_name", list(CLIS))
async def test_text_streams_through_translation(
    base_name: str, provider: RunningProvider, relay: RunningRelay, tmp_path: Path
) -> None:
    provider.reset()
    done = await turn(base_name, relay, tmp_path, "SAY hello through chat")
    assert isinstance(done.outcome, ev.TurnFinished), done.events
    assert done.text == "hello through chat"
    assert len(done.of(ev.TextDelta)) > 1  # progressive deltas, not one buffered block
    assert chat_calls(provider) and not [
        r for r in provider.requests() if r["path"] in ("/v1/responses", "/v1/messages")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("base_name", list(CLIS))
async def test_tool_call_round_trip_and_reasoning(
    base_name: str, provider: RunningProvider, relay: RunningRelay, tmp_path: Path
) -> None:
    provider.reset()
    prompt = "THINK checking first\nRUN echo via-chat\nSAY the command said {output}"
    done = await turn(base_name, relay, tmp_path, prompt)
    assert isinstance(done.outcome, ev.TurnFinished), done.events
    assert done.text == "the command said via-chat"
    assert "checking first" in "".join(e.delta for e in done.of(ev.ReasoningDelta))
    calls = chat_calls(provider)
    assert [c["step"] for c in calls] == [0, 1]
    second = calls[1]["body"]["messages"]
    call_id = next(m for m in second if m.get("tool_calls"))["tool_calls"][0]["id"]
    result = next(m for m in second if m["role"] == "tool")
    assert result["tool_call_id"] == call_id and "via-chat" in result["content"]


@pytest.mark.slow
@pytest.mark.parametrize("base_name", list(CLIS))
async def test_provider_error_reaches_the_cli_in_its_own_format(
    base_name: str, provider: RunningProvider, relay: RunningRelay, tmp_path: Path
) -> None:
    provider.reset()
    done = await turn(base_name, relay, tmp_path, "FAIL 400 the provider says no")
    assert isinstance(done.outcome, ev.TurnFailed), done.events
    assert "the provider says no" in done.outcome.message
