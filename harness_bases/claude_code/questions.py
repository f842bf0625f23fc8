"""Claude Code's own question tool, `AskUserQuestion`, answered by the user through the engine.

In `--print` mode the CLI disables the tool ("AskUserQuestion is disabled for this session")
unless a host answers permission prompts: with `--permission-prompt-tool=stdio` it offers the
tool and sends each call to us as a `can_use_tool` control request on stdout. We ask each of
its questions through the turn's `ask_user` (the engine's question machinery: the same
policies as the server's `ask_user` MCP tool) and answer `allow` with the answers in
`updatedInput.answers` ({question text: answer}); the CLI then gives the model the tool result
"Your questions have been answered: ...". Checked against the pinned CLI (2.1.328).
"""

from __future__ import annotations

from typing import Any

from harness_bases.base import UserAsker

QUESTION_TOOL = "AskUserQuestion"


def is_question_request(msg: dict[str, Any]) -> bool:
    """Whether a control request is the CLI asking leave to run AskUserQuestion."""
    request = msg.get("request") or {}
    return request.get("subtype") == "can_use_tool" and request.get("tool_name") == QUESTION_TOOL


async def answered(msg: dict[str, Any], ask: UserAsker) -> dict[str, Any] | None:
    """The control response carrying the user's answers; None when an answer did not come
    (the turn was parked or stopped: the process is about to go, so nothing is sent)."""
    tool_input = (msg.get("request") or {}).get("input") or {}
    answers: dict[str, str] = {}
    for question in tool_input.get("questions") or []:
        if not isinstance(question, dict):
            continue
        text = str(question.get("question") or "")
        options = tuple(
            str(o["label"])
            for o in question.get("options") or []
            if isinstance(o, dict) and o.get("label")
        )
        answer = await ask(text, options)
        if answer is None:
            return None
        answers[text] = answer
    allow = {"behavior": "allow", "updatedInput": {**tool_input, "answers": answers}}
    response = {"subtype": "success", "request_id": msg.get("request_id"), "response": allow}
    return {"type": "control_response", "response": response}
