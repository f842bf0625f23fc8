"""Re-priming's trigger on the real pinned CLIs (Memories §9.1): each base whose CLI reports a
compaction of its conversation says so (`ConversationCompacted`), made to compact here the way
it does on its own, against the scripted provider (no sandbox)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_bases import events as ev
from harness_bases.base import Invocation, TurnSpec
from harness_bases.claude_code import ClaudeCodeBase
from harness_bases.codex import CodexBase, instructions
from harness_bases.pi import PiBase
from harness_bases.pi.config import AGENT_DIR
from tests.conftest import installed_tools
from tests.scripted_provider import RunningProvider
from tests.support.live_base import LiveBase

# Codex compacts a thread once its tokens pass this (its context window's share otherwise,
# which no scripted turn reaches).
CODEX_COMPACT_AT = 1_000


class CompactingCodex(CodexBase):
    """The Codex base with a low `model_auto_compact_token_limit` in the config it writes."""

    def prepare(self, turn: TurnSpec) -> Invocation:
        invocation = super().prepare(turn)
        config = turn.host_home / ".codex" / "config.toml"
        lines = config.read_text().splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("["))  # top-level keys
        lines.insert(at, f"model_auto_compact_token_limit = {CODEX_COMPACT_AT}")
        config.write_text("\n".join(lines) + "\n")
        return invocation


@pytest.mark.slow
async def test_codex_reports_its_compaction_and_forgets_what_it_injected(
    codex_installed: Path, provider: RunningProvider, tmp_path: Path
) -> None:
    """Codex compacts a resumed thread past its limit before the turn's first model call,
    and says so twice (a `contextCompaction` item and `thread/compacted`): one event."""
    env = LiveBase.fresh(CompactingCodex(), provider, codex_installed, tmp_path, timeout=90)
    first = await env.run("SAY one", system_prompt="Alpha rule.")
    assert first.outcome == ev.TurnFinished() and not first.of(ev.ConversationCompacted)
    codex_home = env.home / ".codex"
    assert instructions.recorded(codex_home, first.native_id) == "Alpha rule."
    second = await env.run(
        "SAY two", system_prompt="Alpha rule.", native_session_id=first.native_id
    )
    assert second.outcome == ev.TurnFinished() and second.text == "two"
    assert second.of(ev.ConversationCompacted) == [ev.ConversationCompacted()]
    # What was injected into the history may be summarised away: the next turn tells it again.
    assert instructions.recorded(codex_home, first.native_id) is None


@pytest.mark.slow
async def test_claude_code_reports_its_compaction(
    provider: RunningProvider, tmp_path: Path
) -> None:
    """The pinned CLI honours `/compact` on its stream-json input and reports
    `system/compact_boundary` (its own auto-compaction reports the same)."""
    tools = installed_tools("claude-code")
    env = LiveBase.fresh(
        ClaudeCodeBase(), provider, tools, tmp_path, model="claude-test", gateway_url=provider.url
    )
    first = await env.run("SAY one")
    assert first.outcome == ev.TurnFinished() and not first.of(ev.ConversationCompacted)
    second = await env.run("/compact", native_session_id=first.native_id)
    assert second.outcome == ev.TurnFinished()
    assert second.of(ev.ConversationCompacted) == [ev.ConversationCompacted()]
    assert second.native_id == first.native_id  # the same conversation, compacted


class CompactingPi(PiBase):
    """The Pi base keeping almost none of its model's context window in reserve, so its
    next prompt finds the session past its compaction threshold."""

    def prepare(self, turn: TurnSpec) -> Invocation:
        invocation = super().prepare(turn)
        settings = turn.host_home / AGENT_DIR / "settings.json"
        written = json.loads(settings.read_text())
        written["compaction"] = {"enabled": True, "reserveTokens": 127_000, "keepRecentTokens": 10}
        settings.write_text(json.dumps(written))
        return invocation


@pytest.mark.slow
async def test_pi_reports_its_compaction(provider: RunningProvider, tmp_path: Path) -> None:
    """Pi checks its session against the threshold before it sends a prompt and compacts
    there (what it starts after a turn's end is cut short when the turn closes its stdin)."""
    env = LiveBase.fresh(CompactingPi(), provider, installed_tools("pi"), tmp_path, timeout=90)
    first = await env.run("SAY one")
    assert first.outcome == ev.TurnFinished() and not first.of(ev.ConversationCompacted)
    second = await env.run("SAY two", native_session_id=first.native_id)
    assert second.outcome == ev.TurnFinished() and second.text == "two"
    assert second.of(ev.ConversationCompacted) == [ev.ConversationCompacted()]
