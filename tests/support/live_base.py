"""A base against its real pinned CLI and the scripted provider, with no sandbox: what every
live base test file (Codex, Claude Code, OpenCode, Pi, Qwen Code, Gemini CLI) runs its turns
through. A file names its base, its fixtures folder and how long a turn may take; the rest
(a fresh home and workspace, the turn's spec, capturing the CLI's output as parser fixtures)
is here, once.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_bases.base import HarnessBase, TurnSpec
from tests.scripted_provider import RunningProvider
from tests.support.direct_turn import DirectTurn, direct_spec, run_direct_turn


def capturing(variable: str) -> bool:
    """Whether this run rewrites the base's parser fixtures (`UHP_CAPTURE_<BASE>_FIXTURES=1`)."""
    return os.environ.get(variable) == "1"


@dataclass
class LiveBase:
    base: HarnessBase
    provider: RunningProvider
    tools: Path
    home: Path
    workspace: Path
    gateway_url: str
    model: str = "gpt-test"
    timeout: float = 90.0
    gateway_token: str | None = None  # a gateway of the test's own, in front of the provider
    fixtures: Path | None = None  # set when capturing: `run(capture=NAME)` saves there

    @classmethod
    def fresh(
        cls,
        base: HarnessBase,
        provider: RunningProvider,
        tools: Path,
        tmp_path: Path,
        **kw: Any,
    ) -> LiveBase:
        """A new home and workspace, and a provider that has seen no request yet."""
        provider.reset()
        home, workspace = tmp_path / "home", tmp_path / "ws"
        home.mkdir()
        workspace.mkdir()
        kw.setdefault("gateway_url", provider.base_url)
        return cls(base, provider, tools, home, workspace, **kw)

    def spec(self, prompt: str, **kw: object) -> TurnSpec:
        spec = direct_spec(
            prompt,
            model=self.model,
            gateway_url=self.gateway_url,
            home=self.home,
            workspace=self.workspace,
            tools=self.tools,
            **kw,
        )
        if self.gateway_token is not None:
            spec = dataclasses.replace(spec, gateway_token=self.gateway_token)
        return spec

    async def run(
        self,
        prompt: str,
        interrupt_when: Callable[[DirectTurn], bool] | None = None,
        capture: str | None = None,
        wrap: list[str] | None = None,
        **kw: object,
    ) -> DirectTurn:
        """One turn the way the engine runs it (`capture` names the fixture it may become,
        `wrap` goes in front of the CLI's argv)."""
        turn = await run_direct_turn(
            self.base,
            self.spec(prompt, **kw),
            timeout=self.timeout,
            exit_timeout=15,
            interrupt_when=interrupt_when,
            wrap=wrap,
        )
        if capture and self.fixtures is not None:
            turn.proc.save_stdout(self.fixtures / f"{capture}.jsonl")
        return turn


def chat_bodies(provider: RunningProvider) -> list[dict]:
    """The Chat Completions requests the provider received, oldest first."""
    return [r["body"] for r in provider.requests() if r["path"].endswith("/chat/completions")]


def offered_tools(body: dict) -> list[str]:
    """The names of the tools a Chat Completions request offers the model."""
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def system_text(body: dict) -> str:
    """Every system message of a Chat Completions request, as one text."""
    return "\n".join(
        json.dumps(m.get("content")) for m in body["messages"] if m.get("role") == "system"
    )
