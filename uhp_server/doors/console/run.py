"""Running a task from the console: a new session's first turn, another turn of a session,
and the answers to an agent's questions. Each is the engine's `start` or `answer`, as the
`/v1/responses` route and the Oumi door make them, for the visitor's principal; a task from
the console may ask its user (questions pause the turn until answered on the session page).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response

from uhp_server.doors.console import guard
from uhp_server.doors.console.guard import PREFIX, Visitor
from uhp_server.doors.console.pages import ConsoleRoute, see_other
from uhp_server.doors.console.render import page
from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.uploads import receive_upload
from uhp_server.engine import (
    INPUT_REQUIRED,
    Engine,
    EngineTask,
    Question,
    QuestionPolicy,
    ToolAnswer,
)
from uhp_server.errors import ApiError

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

MAX_PROMPT = 60_000  # characters: the form's own cap is 64 KB (forms.MAX_FORM_BYTES)
MAX_MODEL = 200
MAX_ATTACHMENTS = 10


@dataclass(frozen=True)
class Asking:
    """The questions the session's latest turn waits on, and the turn that asked them."""

    response_id: str
    questions: tuple[Question, ...]


def _prompt(fields: dict[str, str]) -> str:
    prompt = fields.get("prompt", "").strip()
    if not prompt:
        raise ApiError(400, "invalid_input", "Type a prompt for the agent.")
    if len(prompt) > MAX_PROMPT:
        raise ApiError(400, "invalid_input", "That prompt is too long.")
    return prompt


def _model(fields: dict[str, str]) -> str | None:
    model = fields.get("model", "").strip()
    if len(model) > MAX_MODEL or not model.isprintable():
        raise ApiError(400, "invalid_input", "That model name is not valid.")
    return model or None


async def _started(
    engine: Engine, visitor: Visitor, task: EngineTask, request: Request, settings: SettingsDep
) -> str:
    """Start the task; the id of the session it runs in."""
    accepted = await engine.start(task, base_url=guard.own_origin(request, settings))
    state = await engine.state(visitor.principal.id, accepted.response_id)
    return str(state.response["metadata"]["session_id"])


def _file_ids(listed: str) -> list[str]:
    """The attached files' ids a form carries, comma-separated, at most MAX_ATTACHMENTS."""
    ids = [part.strip() for part in listed.split(",") if part.strip()]
    if len(ids) > MAX_ATTACHMENTS or any(len(i) > 64 or not i.isascii() for i in ids):
        raise ApiError(400, "invalid_input", f"Attach at most {MAX_ATTACHMENTS} files.")
    return ids


def _task_input(prompt: str, file_ids: list[str]) -> str | list[dict[str, Any]]:
    """The prompt alone, or a user message of the prompt and its files (the engine finds
    each file among the principal's own, and refuses another's)."""
    if not file_ids:
        return prompt
    parts = [{"type": "input_text", "text": prompt}]
    parts += [{"type": "input_file", "file_id": file_id} for file_id in file_ids]
    return [{"type": "message", "role": "user", "content": parts}]


@router.get(PREFIX + "/run")
async def run_form(request: Request, engine: EngineDep, files: str = "") -> Response:
    visitor = await guard.visitor(request)
    harnesses = await engine.harnesses.all(visitor.principal.id)
    attached = await engine.files.uploaded(visitor.principal.id, _file_ids(files))
    return page(
        "run.html",
        visitor=visitor,
        section="run",
        harnesses=sorted(harnesses, key=lambda h: h.name.lower()),
        models=sorted({h.default_model for h in harnesses if h.default_model}),
        attached=attached,
        attached_ids=",".join(f.id for f in attached),
        max_attachments=MAX_ATTACHMENTS,
    )


@router.post(PREFIX + "/run/attach")
async def attach_file(request: Request, engine: EngineDep, settings: SettingsDep) -> Response:
    """One file, uploaded as `POST /v1/files` uploads it, then back to the form with it
    among the attached ones. The Origin is checked before a byte is kept, the token once
    the form's fields are read (a refused upload is discarded)."""
    visitor = await guard.visitor(request)
    guard.check_origin(request, settings)
    upload = await receive_upload(request, engine.files.new_upload, settings.max_file_bytes)
    try:
        guard.check_token(upload.fields.get(guard.CSRF_FIELD), visitor.csrf_token)
        ids = _file_ids(upload.fields.get("files", ""))
        if len(ids) >= MAX_ATTACHMENTS:
            raise ApiError(400, "invalid_input", f"Attach at most {MAX_ATTACHMENTS} files.")
    except Exception:
        upload.sink.discard()
        raise
    kept = await engine.files.keep_upload(
        visitor.principal.id, upload.sink, upload.filename, upload.media_type, "user_data"
    )
    return see_other(f"{PREFIX}/run?{urlencode({'files': ','.join([*ids, kept.id])})}")


@router.post(PREFIX + "/run")
async def run_task(request: Request, engine: EngineDep, settings: SettingsDep) -> Response:
    visitor, fields = await guard.checked_write(request, settings)
    task = EngineTask(
        principal_id=visitor.principal.id,
        harness_id=fields.get("harness") or None,
        input=_task_input(_prompt(fields), _file_ids(fields.get("files", ""))),
        model=_model(fields),
        questions=QuestionPolicy.pause(),
    )
    session_id = await _started(engine, visitor, task, request, settings)
    return see_other(f"{PREFIX}/sessions/{session_id}")


@router.post(PREFIX + "/sessions/{session_id}/continue")
async def continue_session(
    session_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, fields = await guard.checked_write(request, settings)
    latest = await engine.sessions.latest_response(visitor.principal.id, session_id)
    session = await engine.sessions.get(visitor.principal.id, session_id)
    task = EngineTask(
        principal_id=visitor.principal.id,
        harness_id=session.harness_id,
        input=_prompt(fields),
        previous_response_id=latest,
        model=_model(fields),
        questions=QuestionPolicy.pause(),
    )
    await _started(engine, visitor, task, request, settings)
    return see_other(f"{PREFIX}/sessions/{session_id}")


async def asking(engine: Engine, principal_id: str, session_id: str) -> Asking | None:
    """What the session's latest turn asks its user, if it waits on questions."""
    latest = await engine.sessions.latest_response(principal_id, session_id)
    if latest is None:
        return None
    state = await engine.state(principal_id, latest)
    if state.status is not INPUT_REQUIRED or not state.questions:
        return None
    return Asking(latest, state.questions)


@router.post(PREFIX + "/sessions/{session_id}/answer")
async def answer_question(
    session_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, fields = await guard.checked_write(request, settings)
    waiting = await asking(engine, visitor.principal.id, session_id)
    call_id = fields.get("call_id", "")
    if waiting is None or call_id not in {q.call_id for q in waiting.questions}:
        raise ApiError(409, "invalid_input", "That question is no longer waiting for an answer.")
    answer = fields.get("answer", "").strip()
    if not answer:
        raise ApiError(400, "invalid_input", "Type an answer, or choose one.")
    await engine.answer(visitor.principal.id, waiting.response_id, [ToolAnswer(call_id, answer)])
    return see_other(f"{PREFIX}/sessions/{session_id}")
