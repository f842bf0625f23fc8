"""Placeholder until the engine foundation lands."""

from __future__ import annotations

from typing import Any


class AgentosRuns:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    async def invoke(self, principal_id: str, invocation: Any) -> dict[str, Any]:
        raise NotImplementedError
