"""A tool result's content as the text an output item carries (shared by the parsers of CLIs
that report Anthropic-style content: a string, or a list of parts)."""

from __future__ import annotations

import json
from typing import Any


def tool_result_text(content: Any) -> str:
    """A string as is; text parts joined by newlines (any other part as JSON)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    parts = []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            parts.append(json.dumps(part, ensure_ascii=False))
    return "\n".join(parts)
