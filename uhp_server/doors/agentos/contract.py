"""The AgentOS agent contract's shapes: the invoke body as read, and the three answers.

Every answer is 200 JSON: a non-2xx (or no answer) fails the run as `agent_interrupted`,
so even an internal fault is a `failed` answer with an error code of the contract's form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CAPABILITY = "run"
_CODE = re.compile(r"[a-z][a-z0-9_]{0,62}")


def completed(output: dict[str, Any]) -> dict[str, Any]:
    return {"status": "completed", "output": output}


def failed(code: str, message: str) -> dict[str, Any]:
    message = message.strip() or "The agent failed."
    return {"status": "failed", "error": {"code": error_code(code), "message": message}}


def suspended(hold_id: str) -> dict[str, Any]:
    return {"status": "suspended", "hold_id": hold_id}


def error_code(code: str) -> str:
    """A code of the contract's form (lowercase letters, digits and `_`, starting with a
    letter, at most 63 characters): anything else would be recorded as `agent_failed`."""
    cleaned = re.sub(r"[^a-z0-9_]+", "_", str(code).lower()).strip("_")
    if cleaned and not cleaned[0].isalpha():
        cleaned = "e_" + cleaned
    cleaned = cleaned[:63]
    return cleaned if _CODE.fullmatch(cleaned) else "agent_error"


class BadInvocation(Exception):
    """The body cannot be acted on; `code` and the message go back in a `failed` answer."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Invocation:
    """What this door reads of an invoke body; every other field is ignored."""

    capability: str
    run_id: str
    invocation_id: str  # `invocation.id`: the same on every attempt of one invocation
    session_id: str | None
    kind: str  # "start" | "resume"
    input: dict[str, Any]
    resume: Any
    token: str  # never stored or logged: used only while this invocation is answered
    api_url: str
    llm_base_url: str
    llm_api_key: str
    models: dict[str, Any]
    eval: dict[str, Any] | None

    def __repr__(self) -> str:  # the token and context secrets stay out of any log line
        return f"Invocation(run_id={self.run_id!r}, kind={self.kind!r})"


def _text(value: Any, name: str, *, required: bool = True) -> str:
    if isinstance(value, str) and value:
        return value
    if value is None and not required:
        return ""
    raise BadInvocation("invalid_invocation", f"'{name}' must be a non-empty string.")


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def read_invocation(body: Any) -> Invocation:
    if not isinstance(body, dict):
        raise BadInvocation("invalid_invocation", "The invoke body must be a JSON object.")
    invocation = _object(body.get("invocation"))
    context = _object(body.get("context"))
    config = _object(context.get("config"))
    llm = _object(context.get("llm"))
    session_id = body.get("session_id")
    kind = invocation.get("kind") or "start"
    if kind not in ("start", "resume"):
        raise BadInvocation("invalid_invocation", "invocation.kind must be start or resume.")
    evaluation = context.get("eval")
    api_key = llm.get("api_key")
    invocation_id = invocation.get("id")
    return Invocation(
        capability=_text(body.get("capability"), "capability"),
        run_id=_text(body.get("run_id"), "run_id"),
        invocation_id=invocation_id if isinstance(invocation_id, str) else "",
        session_id=session_id if isinstance(session_id, str) and session_id else None,
        kind=kind,
        input=_object(body.get("input")),
        resume=body.get("resume"),
        token=_text(context.get("token"), "context.token"),
        api_url=_text(context.get("api_url"), "context.api_url", required=False),
        llm_base_url=_text(llm.get("base_url"), "context.llm.base_url"),
        llm_api_key=api_key if isinstance(api_key, str) else "",
        models=_object(config.get("models")),
        eval=evaluation if isinstance(evaluation, dict) else None,
    )


def chosen_model(models: dict[str, Any]) -> str | None:
    """`agent` of the version's models, else its first entry; None: the harness default."""
    agent = models.get("agent")
    if isinstance(agent, str) and agent:
        return agent
    for value in models.values():
        if isinstance(value, str) and value:
            return value
    return None


def decision_text(decision: Any) -> str:
    """A person's decision on a hold as the answer the agent reads."""
    if isinstance(decision, str):
        return decision
    if decision is None:
        return "No decision was made (the question expired)."
    if isinstance(decision, dict):
        for key in ("answer", "text", "comment", "value", "action"):
            value = decision.get(key)
            if isinstance(value, str) and value:
                return value
    import json

    return json.dumps(decision, ensure_ascii=False)
