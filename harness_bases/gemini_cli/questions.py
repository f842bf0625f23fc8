"""Gemini CLI's own question tool, `ask_user`, answered by the user through the engine.

Gemini CLI 0.61.0 takes `ask_user` out of its registry in ACP mode, and a call of it would
only be a permission request with no answers; with someone to answer, the load hook keeps
the tool and sends its questions as the ACP extension request `_uhp/ask_user`
({sessionId, questions}: each with `question`, `header`, `type`, `options` of
`{label, description}`) (acp_fixes.mjs). Each question is asked through the turn's
`ask_user`, like the server's `ask_user` MCP tool; the reply `{answers: {index: text}}` is
what the CLI's own dialog would give, and the model reads `{"answers": {...}}`.
"""

from __future__ import annotations

from typing import Any

from harness_bases.base import UserAsker

REQUEST_METHOD = "_uhp/ask_user"
ASK_USER_ENV = "UHP_ASK_USER"  # "1": the load hook keeps `ask_user` and routes it to us


async def answered(params: dict[str, Any], ask: UserAsker) -> dict[str, Any] | None:
    """The request's result; None (an error reply) when an answer did not come: the turn was
    parked or stopped, and the process is about to go."""
    answers: dict[str, str] = {}
    questions = params.get("questions")
    for index, question in enumerate(questions if isinstance(questions, list) else []):
        if not isinstance(question, dict):
            continue
        options = tuple(
            str(o["label"])
            for o in question.get("options") or []
            if isinstance(o, dict) and o.get("label")
        )
        answer = await ask(str(question.get("question") or ""), options)
        if answer is None:
            return None
        answers[str(index)] = answer
    return {"answers": answers}
