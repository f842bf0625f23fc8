"""Questions the agent asks the user, and what the task's question policy does with them.

The agent asks through the server's own question tool (`ask_user` on the built-in MCP
server `uhp-user`, gateway/user_questions.py) or through its CLI's own question tool, which
the base's driver maps onto the same `ask` (TurnSpec.ask_user). The question becomes a
function_call item in the event log. The policy decides the answer: RECORDED takes the next
recorded answer, HOLD asks the door's callback, PAUSE (or a HOLD callback that defers) waits
for `Engine.answer`: the task reports input_required, the agent's model connection is
suspended, and the answer comes back as the tool's result in the same conversation.

A paused turn keeps its process for `keep_seconds`; after that it is parked: the turn ends
`incomplete` (reason `input_required`, the pending calls named) and a later answer starts a
new turn that resumes the CLI's own conversation and tells the agent the user's answer.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any, Protocol

from harness_bases import events as ev
from uhp_server.engine.requests import Question, QuestionMode, ToolAnswer
from uhp_server.engine.turns.run import Run, TurnPlan
from uhp_server.gateway.user_questions import QUESTION_TOOL

# The CLIs' own question tools that ask through the same machinery when the door can take a
# question (the base's driver calls TurnSpec.ask_user); the engine records the question
# itself as an ask_user call, so the CLI's own report of that call is left out.
NATIVE_QUESTION_TOOLS = frozenset(
    {
        "AskUserQuestion",  # Claude Code (harness_bases/claude_code/questions.py)
        "request_user_input",  # Codex (harness_bases/codex/questions.py)
        "clarify",  # Hermes (harness_bases/hermes/questions.py)
        "ask_user",  # Gemini CLI (harness_bases/gemini_cli/questions.py)
    }
)
# Bases whose CLI takes no HTTP MCP server ask in their final text instead (TEXT_MARKER).
TEXT_MARKER = "QUESTION FOR THE USER:"
TEXT_INSTRUCTION = (
    "If you cannot go on without asking the user something, end your turn with the question "
    f"alone on its last line, starting with '{TEXT_MARKER}'. The user's answer will come as "
    "the next message."
)


class QuestionBoard(Protocol):
    """Where a waiting question is shown to the other replicas (engine/replicas/answer_relay.py)."""

    async def post(self, run: Run, question: Question) -> None: ...

    async def withdraw(self, run: Run, question: Question) -> str | None: ...

    def withdraw_later(self, run: Run, question: Question) -> None: ...


_NO_RECORDED_ANSWER = "(No answer was recorded for this question; carry on as you judge best.)"


def is_question_tool(name: str) -> bool:
    """Whether a tool call the CLI reports is its call of the server's question tool (the
    engine records that call itself, so the CLI's own report of it is left out)."""
    lowered = name.lower()
    return QUESTION_TOOL in lowered and ("uhp-user" in lowered or "uhp_user" in lowered)


def question_arguments(text: str, options: tuple[str, ...]) -> str:
    body: dict[str, Any] = {"question": text}
    if options:
        body["options"] = list(options)
    return json.dumps(body)


async def ask(
    run: Run,
    text: str,
    options: tuple[str, ...],
    keep_seconds: float,
    board: QuestionBoard | None = None,
) -> str | None:
    """The agent asks `text`: record the call, get the answer as the policy says, record it.
    None: no answer came while the process was kept (the turn is parked) or it stopped.
    `board`: other replicas see the question while it waits, and may answer it."""
    call_id = "call_" + secrets.token_hex(12)
    arguments = question_arguments(text, options)
    question = Question(call_id, QUESTION_TOOL, arguments, text, options)
    started = ev.ToolCallStarted(call=call_id, name=QUESTION_TOOL, arguments=arguments)
    await run.record(lambda: run.builder.apply(started))
    answer = await _policy_answer(run, question)
    if answer is None:
        answer = await _wait_for_user(run, question, keep_seconds, board)
    if answer is None:
        return None
    finished = ev.ToolCallFinished(call=call_id, output=answer)
    await run.record(lambda: run.builder.apply(finished))
    return answer


async def _policy_answer(run: Run, question: Question) -> str | None:
    policy = run.questions
    if policy.mode is QuestionMode.RECORDED:
        index = run.recorded_used
        run.recorded_used += 1
        return policy.recorded[index] if index < len(policy.recorded) else _NO_RECORDED_ANSWER
    if policy.mode is QuestionMode.HOLD and policy.on_question is not None:
        return await policy.on_question(question)
    return None


async def _wait_for_user(
    run: Run, question: Question, keep_seconds: float, board: QuestionBoard | None
) -> str | None:
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[str] = loop.create_future()
    run.answer_waiters[question.call_id] = answered
    run.asking.append(question)
    if run.grant is not None:
        run.grant.model_paused = True  # a waiting agent holds no model connection
    posted = False
    stopping: asyncio.Future[Any] = asyncio.ensure_future(run.stop.wait())  # parked too
    waits: set[asyncio.Future[Any]] = {answered, stopping}
    try:
        if board is not None:
            await board.post(run, question)
            posted = True
        await asyncio.wait(
            waits,
            timeout=keep_seconds,
            return_when=asyncio.FIRST_COMPLETED,
        )
        # Withdrawing decides against an answer another replica is recording right now:
        # one recorded first is used rather than parking.
        relayed = await board.withdraw(run, question) if board is not None else None
        posted = False
        if answered.done():
            return answered.result()
        if relayed is not None and not run.stop.is_set():
            return relayed
        if not run.stop.is_set():
            park(run)
        return None
    finally:
        if posted and board is not None:
            board.withdraw_later(run, question)
        stopping.cancel()
        run.answer_waiters.pop(question.call_id, None)
        if not run.parked:
            run.asking.remove(question)
        if not run.asking and run.grant is not None:
            run.grant.model_paused = False


def park(run: Run) -> None:
    """End the paused turn now, its questions left pending (an answer starts a new turn)."""
    run.park()


def deliver(run: Run, answers: list[ToolAnswer]) -> None:
    """Hand the user's answers to the questions the live turn waits on."""
    for answer in answers:
        waiter = run.answer_waiters.get(answer.call_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(answer.output)


def pending_questions(response: dict[str, Any]) -> tuple[Question, ...]:
    """The question calls a finished (parked or interrupted) response left unanswered."""
    answered = {i["call_id"] for i in response["output"] if i["type"] == "function_call_output"}
    pending = []
    for item in response["output"]:
        if item["type"] != "function_call" or item["name"] != QUESTION_TOOL:
            continue
        if item["call_id"] in answered:
            continue
        pending.append(question_of_call(item["call_id"], item["arguments"]))
    return tuple(pending)


def question_of_call(call_id: str, arguments: str) -> Question:
    """The question an ask_user call's arguments ask."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = {}
    text = str(parsed.get("question", "")) if isinstance(parsed, dict) else ""
    options = tuple(str(o) for o in parsed.get("options") or ()) if text else ()
    return Question(call_id, QUESTION_TOOL, arguments, text, options)


def answered_questions(response: dict[str, Any]) -> list[tuple[str, str]]:
    """(question, the user's answer) of every question the response asked and got answered."""
    outputs = {
        i["call_id"]: str(i.get("output", ""))
        for i in response["output"]
        if i["type"] == "function_call_output"
    }
    return [
        (question_of_call(item["call_id"], item["arguments"]).text, outputs[item["call_id"]])
        for item in response["output"]
        if item["type"] == "function_call"
        and item["name"] == QUESTION_TOOL
        and item["call_id"] in outputs
    ]


def answers_prompt(
    questions: tuple[Question, ...],
    answers: list[ToolAnswer],
    *,
    request: str = "",
    answered_before: list[tuple[str, str]] | None = None,
) -> str:
    """The new turn's prompt when the paused process is gone: the user's answers. For a CLI
    that forgot the paused turn: first the request it was working on, and the questions the
    user had already answered in that turn (`answered_before`)."""
    by_call = {a.call_id: a.output for a in answers}
    lines = ["You asked the user a question and paused. The user has now answered."]
    if request:
        quoted = "\n".join(f"> {line}" for line in request.splitlines())
        lines[0] = (
            "You were working on this request from the user when you asked them a question "
            f"and paused:\n\n{quoted}\n\nThe user has now answered."
        )
    for text, answer in answered_before or ():
        lines.append(f"Your earlier question: {text}\nThe user's answer: {answer}")
    for q in questions:
        lines.append(
            f"Your question ({q.call_id}): {q.text}\nThe user's answer: {by_call[q.call_id]}"
        )
    lines.append("Carry on with the task using these answers.")
    return "\n\n".join(lines)


def asks_in_text(plan: TurnPlan) -> bool:
    """Whether this turn's agent asks in its final text (no HTTP MCP for the server's question
    tool, and no question tool of its CLI's own)."""
    base = plan.base
    return plan.ask_user and "http" not in base.mcp_transports and not base.asks_natively


def text_question(response: dict[str, Any]) -> str | None:
    """The question a final message ends with (TEXT_MARKER), if any."""
    messages = [i for i in response["output"] if i["type"] == "message"]
    if not messages:
        return None
    parts = messages[-1].get("content") or []
    text = "".join(p.get("text", "") for p in parts if p.get("type") == "output_text")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines or not lines[-1].startswith(TEXT_MARKER):
        return None
    return lines[-1][len(TEXT_MARKER) :].strip() or None


async def park_on_text_question(run: Run, text: str) -> list[str]:
    """Record the question the agent ended its text with as a pending ask_user call, and tell
    a door that holds questions (AgentOS opens its hold) as a question asked through the tool
    would; the turn parks either way, its CLI has ended."""
    call_id = "call_" + secrets.token_hex(12)
    arguments = question_arguments(text, ())
    started = ev.ToolCallStarted(call=call_id, name=QUESTION_TOOL, arguments=arguments)
    await run.record(lambda: run.builder.apply(started))
    policy = run.questions
    if policy.mode is QuestionMode.HOLD and policy.on_question is not None:
        await policy.on_question(Question(call_id, QUESTION_TOOL, arguments, text, ()))
    run.parked = [call_id]
    return run.parked
