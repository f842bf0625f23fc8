"""Hermes' own question tool, `clarify`, answered by the user through the engine.

The pinned ACP adapter offers no `clarify` (its toolset leaves it out and it sets no
callback); with someone to answer, the launcher adds it and its callback sends the ACP
extension request `_uhp/clarify` ({sessionId, question, choices}) to us (acp_launcher.py).
The question is asked through the turn's `ask_user`, like the server's `ask_user` MCP tool;
the reply `{answer}` becomes clarify's `user_response`, which the model reads as the tool's
result. Checked against the pinned Hermes (0.19.0).
"""

from __future__ import annotations

from typing import Any

from harness_bases.base import UserAsker
from harness_bases.hermes.acp_launcher import CLARIFY_METHOD

REQUEST_METHOD = "_" + CLARIFY_METHOD  # ACP extension methods start with "_" on the wire
QUESTION_TOOL = "clarify"


async def answered(params: dict[str, Any], ask: UserAsker) -> dict[str, Any] | None:
    """The request's result; None (an error reply) when an answer did not come: the turn was
    parked or stopped, and the process is about to go."""
    choices = params.get("choices")
    listed = choices if isinstance(choices, list) else []
    options = tuple(str(c) for c in listed if isinstance(c, str) and c)
    answer = await ask(str(params.get("question") or ""), options)
    return None if answer is None else {"answer": answer}
