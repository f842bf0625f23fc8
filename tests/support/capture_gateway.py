"""Record what the real Codex and Claude Code CLIs send, for the gateway's translation tests.

    .venv/bin/python -m tests.support.capture_gateway

Runs each CLI directly (no sandbox) against the scripted provider for a text turn, a
reasoning turn (THINK) and a tool-call turn (RUN: two model calls, the second carrying the
tool's result), and writes every model request the CLI made to
tests/fixtures/gateway/<cli>_<turn>.json (bodies trimmed of the long instructions and tool
descriptions that do not matter to translation). The streamed answers to replay are derived
from these requests by `tests/support/capture_answers.py`.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from harness_bases import registry
from tests.conftest import MODELS, PROVIDER_KEY, installed_tools
from tests.scripted_provider import start_provider
from tests.support.direct_turn import direct_spec, run_direct_turn

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gateway"
TURNS = {
    "text": "SAY hello from the scripted provider",
    "think": "THINK weighing the options\nSAY thought it through",
    "tool": "RUN echo captured\nSAY the command said {output}",
}
CLIS = {
    "codex": ("codex", "gpt-test", "/v1/responses"),
    "claude": ("claude-code", "claude-test", "/v1/messages"),
}
LONG_TEXT = 400  # text fields longer than this are cut (system prompts, tool descriptions)


def trim(value: object) -> object:
    """Cut long strings so the fixtures stay small; the structure is kept whole."""
    if isinstance(value, str) and len(value) > LONG_TEXT:
        return value[:LONG_TEXT] + "…[trimmed]"
    if isinstance(value, list):
        return [trim(v) for v in value]
    if isinstance(value, dict):
        return {k: trim(v) for k, v in value.items()}
    return value


async def capture(cli: str, turn: str, prompt: str) -> None:
    base_name, model, path = CLIS[cli]
    tools = installed_tools(base_name)
    provider = start_provider(PROVIDER_KEY, MODELS)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home, workspace = Path(tmp, "home"), Path(tmp, "ws")
            home.mkdir()
            workspace.mkdir()
            url = provider.base_url if cli == "codex" else provider.url
            spec = direct_spec(
                prompt, model=model, gateway_url=url, home=home, workspace=workspace, tools=tools
            )
            await run_direct_turn(registry()[base_name], spec, timeout=90, exit_timeout=15)
        bodies = [r["body"] for r in provider.requests() if r["path"] == path]
    finally:
        provider.stop()
    target = FIXTURES / f"{cli}_{turn}.json"
    target.write_text(json.dumps(trim(bodies), indent=1, ensure_ascii=False) + "\n")
    print(f"{target}: {len(bodies)} requests")


async def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for cli in CLIS:
        for turn, prompt in TURNS.items():
            await capture(cli, turn, prompt)


if __name__ == "__main__":
    asyncio.run(main())
