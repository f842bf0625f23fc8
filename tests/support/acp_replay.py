"""A Process whose stdout is a captured fixture, for replaying an ACP base's real output
through its real driver (no CLI, no network); records what the driver writes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.base import TurnSpec


def replay_turn(tmp_path: Path, prompt: str = "SAY hello world", **fields: Any) -> TurnSpec:
    """A turn to replay a fixture with: the scripted provider's model, a gateway that is
    never reached (the fixture is the CLI's whole output), folders under `tmp_path`."""
    return TurnSpec(
        prompt=prompt,
        model="gpt-test",
        gateway_url="http://127.0.0.1:9/gateway/openai/v1",
        gateway_token="uhpgw_test",
        host_workspace=tmp_path / "workspace",
        host_home=tmp_path / "home",
        host_tools=tmp_path / "tools",
        **fields,
    )


def text_of(events: list[ev.AgentEvent]) -> str:
    """The answer's text, as its deltas streamed it."""
    return "".join(e.delta for e in events if isinstance(e, ev.TextDelta))


def fixture_lines(folder: Path, name: str) -> list[bytes]:
    return [line for line in (folder / f"{name}.jsonl").read_bytes().split(b"\n") if line]


class ReplayedProcess:
    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines
        self.written: list[dict[str, Any]] = []
        self.stdin_closed = False

    async def write(self, data: bytes) -> None:
        self.written += [json.loads(line) for line in data.splitlines() if line]

    async def close_stdin(self) -> None:
        self.stdin_closed = True

    async def lines(self) -> AsyncIterator[bytes]:
        for line in self._lines:
            yield line

    def stderr_tail(self) -> str:
        return ""

    def sent(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.written if m.get("method") == method]
