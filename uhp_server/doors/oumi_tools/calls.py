"""One tool call, whichever protocol carried it: check the arguments, run the harness's task
within the call's budget, and render the result object or a refusal the model can read."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from uhp_server.doors.harness_result import PROMPT_SCHEMA, failure_reason
from uhp_server.doors.tool_runs import finish_within, task_result, turn_budget
from uhp_server.engine import Engine, EngineTask, SessionKey
from uhp_server.errors import ApiError

MAX_PROMPT_CHARS = PROMPT_SCHEMA["maxLength"]
SESSION_DOOR = "oumi-tools"  # the platform's sessions, whichever protocol carried the call
MIN_BUDGET, MAX_BUDGET = 1, 120  # what the platform allows for one call, in seconds


class Refusal(Exception):
    """The call was refused: `reason` is short and readable (a model reads its start)."""

    def __init__(self, status: int, reason: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.result = result


@dataclass(frozen=True)
class ToolArguments:
    prompt: str
    session_id: str | None


def parse_arguments(arguments: Any) -> ToolArguments:
    """The tool's arguments, or a Refusal naming what is wrong."""
    if not isinstance(arguments, dict):
        raise Refusal(400, "The arguments must be a JSON object with a 'prompt' string.")
    unknown = sorted(set(arguments) - {"prompt", "session_id"})
    if unknown:
        raise Refusal(400, f"Unknown argument '{unknown[0]}'; expected prompt and session_id.")
    prompt = arguments.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise Refusal(400, "'prompt' is required: a non-empty string saying what to do.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise Refusal(400, f"'prompt' is longer than {MAX_PROMPT_CHARS} characters.")
    session_id = arguments.get("session_id")
    if session_id is not None and (not isinstance(session_id, str) or not session_id):
        raise Refusal(400, "'session_id' must be a session_id string from an earlier result.")
    return ToolArguments(prompt, session_id)


def parse_budget(raw: str | None, default: int) -> int:
    if raw is None:
        return default
    # ASCII digits only: str.isdigit() takes "²", which int() then refuses.
    if not re.fullmatch(r"[0-9]{1,9}", raw) or not MIN_BUDGET <= int(raw) <= MAX_BUDGET:
        raise Refusal(400, f"timeout_seconds must be a whole number from 1 to {MAX_BUDGET}.")
    return int(raw)


async def _latest_response(engine: Engine, principal_id: str, session_id: str) -> str:
    try:
        latest = await engine.sessions.latest_response(principal_id, session_id)
    except ApiError:
        raise Refusal(404, "No session with that session_id; omit it to start a new one.") from None
    if latest is None:
        raise Refusal(404, "That session has no turn to continue; omit session_id.")
    return latest


async def _harness_or_refuse(engine: Engine, principal_id: str, harness_id: str) -> None:
    if await engine.harnesses.summary(principal_id, harness_id) is None:
        raise Refusal(404, f"No harness '{harness_id[:80]}' for this credential.")


async def run_tool_call(
    engine: Engine,
    principal_id: str,
    harness_id: str,
    arguments: ToolArguments,
    budget: int,
    base_url: str,
    external_session: str | None = None,
) -> dict[str, Any]:
    """Run the call; returns the result object, or raises Refusal (a failed turn included).

    `external_session`: the platform's own session id (MCP `_meta`), one UHP session per
    principal, harness and id; `arguments.session_id` names a UHP session directly."""
    started = asyncio.get_running_loop().time()
    await _harness_or_refuse(engine, principal_id, harness_id)
    previous = None
    if arguments.session_id is not None:
        previous = await _latest_response(engine, principal_id, arguments.session_id)
    task = EngineTask(
        principal_id=principal_id,
        harness_id=harness_id,
        input=arguments.prompt,
        session=SessionKey(SESSION_DOOR, external_session) if external_session else None,
        previous_response_id=previous,
        timeout_seconds=turn_budget(budget),
    )
    try:
        accepted = await engine.start(task, base_url=base_url)
    except ApiError as exc:
        raise Refusal(exc.status, str(exc)) from None
    response = await finish_within(engine, principal_id, accepted.response_id, budget, started)
    result = await task_result(engine, response, base_url)
    if result["status"] == "failed":
        reason = "The agent's turn failed: " + failure_reason(response)
        raise Refusal(422, reason, result)
    return result
