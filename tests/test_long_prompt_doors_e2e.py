"""A prompt longer than Codex takes in one turn (1 Mi characters) reaches the agent whole,
through the chat door and through UHP alike: its end, past the limit, is what the agent
reads back from the file it was given. Codex only: the limit and the file are its base's."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.conftest import API_KEY, TEST_BASE
from tests.support.server import ServerProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(TEST_BASE != "codex", reason="Codex's per-turn input limit and its file"),
]

END_MARKER = "tail-marker-77413"
# ~1.1 M characters; the scripted model reads the message's last 30 bytes back.
LONG_PROMPT = (
    "RUN tail -c 18 ~/.uhp/input/message.md\nSAY read back: {output}\n"
    + "lorem ipsum " * 92_000
    + END_MARKER
)


def test_a_long_prompt_through_the_chat_door_completes(server: ServerProcess) -> None:
    sdk = openai.OpenAI(base_url=f"{server.url}/openai/v1", api_key=API_KEY, max_retries=0)
    with sdk:
        model = sdk.models.list().data[0].id
        answer = sdk.chat.completions.create(
            model=model, messages=[{"role": "user", "content": LONG_PROMPT}], timeout=300
        )
    assert answer.choices[0].finish_reason == "stop"
    assert END_MARKER in (answer.choices[0].message.content or "")


def test_a_long_prompt_through_uhp_completes(client: httpx.Client) -> None:
    answer = client.post("/v1/responses", json={"input": LONG_PROMPT}, timeout=300)
    assert answer.status_code == 200, answer.text[:500]
    response = answer.json()
    assert response["status"] == "completed", response.get("error")
    assert END_MARKER in response["output"][-1]["content"][0]["text"]
    # The prompt's file lives in the agent's home, never among the turn's artifacts.
    assert not [a for a in response["output"] if a.get("type") == "file"]
