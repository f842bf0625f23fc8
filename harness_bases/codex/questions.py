"""Codex's own question tool, `request_user_input`, answered by the user through the engine.

The model's call reaches us as app-server's `item/tool/requestUserInput` request (params:
`questions`, each with `id`, `header`, `question` and `options` of `{label, description}`);
the result maps each question id to `{"answers": [text]}`. Each question is asked through
the turn's `ask_user`, like the server's `ask_user` MCP tool. Codex offers the tool in its
Default mode only with the `default_mode_request_user_input` feature (config.py).
"""

from __future__ import annotations

from typing import Any

from harness_bases.base import UserAsker

REQUEST_METHOD = "item/tool/requestUserInput"
QUESTION_TOOL = "request_user_input"


async def answered(params: dict[str, Any], ask: UserAsker) -> dict[str, Any]:
    """The request's result; the answers given so far when one did not come (the turn is
    parked or stopping, and its process about to go)."""
    answers: dict[str, dict[str, list[str]]] = {}
    for question in params.get("questions") or []:
        if not isinstance(question, dict):
            continue
        options = tuple(
            str(o["label"])
            for o in question.get("options") or []
            if isinstance(o, dict) and o.get("label")
        )
        answer = await ask(str(question.get("question") or ""), options)
        if answer is None:
            break
        answers[str(question.get("id") or "")] = {"answers": [answer]}
    return {"answers": answers}
