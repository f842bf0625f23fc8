"""What differs for an agent the server knows nothing of: a tool's own name, where agents put
one (`_meta.toolName`, or under their own key: claude-code-acp's `_meta.claudeCode.toolName`),
else ACP's coarse `kind` (`execute`, `edit`, …), else its title, which is often the command
line itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness_bases.acp.parser import AcpParser


def meta_tool_name(update: dict[str, Any]) -> str | None:
    meta = update.get("_meta")
    if not isinstance(meta, dict):
        return None
    candidates = [meta, *(value for value in meta.values() if isinstance(value, dict))]
    for found in (c.get("toolName") for c in candidates):
        if isinstance(found, str) and found:
            return found
    return None


@dataclass
class GenericAcpParser(AcpParser):
    def tool_name(self, update: dict[str, Any]) -> str:
        named = meta_tool_name(update) or update.get("kind")
        return str(named) if named else super().tool_name(update)
