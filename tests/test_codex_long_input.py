"""A prompt over Codex's per-turn input limit goes through a file in the agent's home."""

from __future__ import annotations

from pathlib import Path

from harness_bases.base import TurnSpec
from harness_bases.codex import long_input
from harness_bases.codex.failures import setup_failure
from uhp_server.doors.openai_chat.errors import turn_failure


def spec(tmp_path: Path, prompt: str) -> TurnSpec:
    return TurnSpec(
        prompt=prompt,
        model="m",
        gateway_url="http://gw",
        gateway_token="t",
        host_workspace=tmp_path / "ws",
        host_home=tmp_path / "home",
        host_tools=tmp_path / "tools",
    )


def test_a_prompt_within_the_limit_is_sent_as_is(tmp_path: Path) -> None:
    prompt = "x" * long_input.MAX_INPUT_CHARS
    assert long_input.turn_text(spec(tmp_path, prompt)) == prompt
    assert not (tmp_path / "home" / ".uhp").exists()


def test_a_longer_prompt_is_written_whole_and_the_turn_names_its_file(tmp_path: Path) -> None:
    prompt = "SAY hi\n" + "é" * long_input.MAX_INPUT_CHARS + "the-end"
    text = long_input.turn_text(spec(tmp_path, prompt))
    assert long_input.fits(text) and text.startswith("SAY hi\n")
    assert "/home/agent/.uhp/input/message.md" in text
    written = tmp_path / "home" / ".uhp" / "input" / "message.md"
    assert written.read_text(encoding="utf-8") == prompt


def test_an_input_app_server_refuses_is_the_callers_and_answers_413_at_the_chat_door() -> None:
    refused = setup_failure(
        "turn/start", "Input exceeds the maximum length of 1048576 characters (1100000 provided)"
    )
    assert refused.code == "input_too_large"
    final = {"status": "failed", "error": {"code": refused.code, "message": refused.message}}
    assert turn_failure(final).status == 413
    other = setup_failure("thread/start", "boom")
    assert other.code == "harness_error"
    final = {"status": "failed", "error": {"code": other.code, "message": other.message}}
    assert turn_failure(final).status == 502
