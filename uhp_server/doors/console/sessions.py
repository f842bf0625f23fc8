"""The console's sessions: the list (newest first, filtered, paged by cursor), a session's
page with its turns (rendered as the share page renders them, followed live while one runs),
its files, and the writes on it: share and unshare, cancel, delete.

Every call is the engine's, as the `/v1/sessions` routes make it, for the visitor's principal:
another principal's session id is the engine's 404, shown as a page."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from uhp_server.doors.console import guard
from uhp_server.doors.console.files import files_list
from uhp_server.doors.console.guard import PREFIX, Visitor
from uhp_server.doors.console.pages import ConsoleRoute, see_other
from uhp_server.doors.console.render import PAGE_HEADERS, page
from uhp_server.doors.console.run import Asking, asking
from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.files import ARTIFACT_HEADERS, download_response
from uhp_server.doors.uhp.sessions import decode_cursor, encode_cursor
from uhp_server.doors.uhp.share_page.render import STATUS_LABELS, render_turn, when
from uhp_server.engine import Engine, Session, TurnPage
from uhp_server.errors import ApiError

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

PAGE_SIZE = 25
TURNS_PER_PAGE = 30  # a session page's turns: a long history is paged (bench/console.py)
STATUSES = ("in_progress", "completed", "incomplete", "failed", "cancelled")
MAX_TEXT = 200


def _session_url(session_id: str) -> str:
    return f"{PREFIX}/sessions/{session_id}"


async def _harness_names(engine: Engine, principal_id: str) -> dict[str, str]:
    return {h.id: h.name for h in await engine.harnesses.all(principal_id)}


@router.get(PREFIX)
async def session_list(
    request: Request,
    engine: EngineDep,
    harness: str = "",
    status: str = "",
    q: Annotated[str, Query(max_length=MAX_TEXT)] = "",
    cursor: str = "",
) -> Response:
    visitor = await guard.visitor(request)
    if status and status not in STATUSES:
        raise ApiError(400, "invalid_input", "That status is not one a session has.")
    after = decode_cursor(cursor) if cursor else None
    text = q.strip()
    sessions, more = await engine.sessions.page(
        visitor.principal.id, PAGE_SIZE, after, harness or None, status or None, text or None
    )
    names = await _harness_names(engine, visitor.principal.id)
    filters = {"harness": harness, "status": status, "q": text}
    return page(
        "sessions.html",
        visitor=visitor,
        section="sessions",
        rows=[_row(s, names) for s in sessions],
        harnesses=sorted(names.items(), key=lambda item: item[1].lower()),
        statuses=[(s, STATUS_LABELS.get(s, s)) for s in STATUSES],
        filters=filters,
        filtered=any(filters.values()),
        next_cursor=encode_cursor(sessions[-1]) if more and sessions else None,
        paged=bool(cursor),
    )


def _row(session: Session, names: dict[str, str]) -> dict[str, str]:
    return {
        "url": _session_url(session.id),
        "title": session.title or "Untitled session",
        "harness": names.get(session.harness_id, session.harness_id),
        "status": session.status,
        "status_label": STATUS_LABELS.get(session.status, session.status),
        "started": when(session.created_at),
        "updated": when(session.updated_at),
    }


@router.get(PREFIX + "/sessions/{session_id}")
async def session_page(
    session_id: str,
    request: Request,
    engine: EngineDep,
    settings: SettingsDep,
    before: Annotated[int | None, Query(ge=1, le=10**9)] = None,
) -> Response:
    """The session and a page of its turns: the latest TURNS_PER_PAGE, followed live, or,
    with `before`, the ones numbered before it (a long history is never read whole)."""
    visitor = await guard.visitor(request)
    session = await engine.sessions.get(visitor.principal.id, session_id)
    shown = await engine.sessions.turn_page(
        visitor.principal.id, session.id, TURNS_PER_PAGE, before
    )
    latest = shown.first_number + len(shown.turns) > shown.total
    state = turns_state(session, shown, latest)
    names = await _harness_names(engine, visitor.principal.id)
    waiting = await asking(engine, visitor.principal.id, session.id)
    return page(
        "session.html",
        questions=[] if waiting is None else _questions(waiting),
        files=files_list(
            session.id, await engine.files.of_session(visitor.principal.id, session.id)
        ),
        phase=_phase(state, waiting),
        visitor=visitor,
        section="sessions",
        session=session,
        session_id=session.id,
        title=session.title or "Untitled session",
        harness=names.get(session.harness_id, session.harness_id),
        started=when(session.created_at),
        state=state,
        latest=latest,
        earlier=shown.first_number - 1,
        first_number=shown.first_number,
        last_number=shown.first_number + len(shown.turns) - 1,
        total=shown.total,
        later=None if latest else shown.first_number + len(shown.turns) + TURNS_PER_PAGE,
        status_label=STATUS_LABELS.get(state["status"], state["status"]),
        share_url=await _share_url(engine, visitor, session.id, request, settings),
    )


def turns_state(session: Session, shown: TurnPage, latest: bool = True) -> dict[str, Any]:
    """The shown turns rendered as the shared page renders them (links relative to the
    session's page: <id>/files/<file>), each with its number and a key that changes when
    its HTML does; whether a turn runs, and the session's status."""
    rendered = [
        (number, render_turn(session.id, number, turn))
        for number, turn in enumerate(shown.turns, start=shown.first_number)
    ]
    if latest:
        running = any((t.response or {}).get("status") == "in_progress" for t in shown.turns)
    else:  # the running turn, if any, is on the latest page
        running = session.status == "in_progress"
    return {
        "running": running,
        "status": "in_progress" if running else session.status,
        "status_label": STATUS_LABELS.get(session.status, session.status),
        "turns": [{"number": n, "key": r.key, "html": r.html} for n, r in rendered],
    }


def _questions(waiting: Asking) -> list[dict[str, object]]:
    return [
        {"call_id": q.call_id, "text": q.text, "options": list(q.options)}
        for q in waiting.questions
    ]


def _phase(state: dict[str, object], waiting: Asking | None) -> str:
    """What the page's controls depend on: running or not, the questions waiting. The live
    page reloads when it changes (its turns alone it swaps in place)."""
    asked = ",".join(q.call_id for q in waiting.questions) if waiting else ""
    return f"{'running' if state['running'] else 'idle'}:{asked}"


async def _share_url(
    engine: Engine, visitor: Visitor, session_id: str, request: Request, settings: SettingsDep
) -> str | None:
    try:
        share = await engine.shares.current(visitor.principal.id, session_id)
    except ApiError as err:
        if err.status == 404:
            return None
        raise
    return guard.own_origin(request, settings) + f"/s/{share.token}"


@router.get(PREFIX + "/sessions/{session_id}/state")
async def session_live_state(session_id: str, request: Request, engine: EngineDep) -> Response:
    """What the session page polls when it cannot follow the live stream, or while no turn
    runs: the latest turns' HTML, as the page has it."""
    visitor = await guard.visitor(request)
    session = await engine.sessions.get(visitor.principal.id, session_id)
    shown = await engine.sessions.turn_page(visitor.principal.id, session.id, TURNS_PER_PAGE)
    state = turns_state(session, shown)
    state["phase"] = _phase(state, await asking(engine, visitor.principal.id, session.id))
    return JSONResponse(state, headers=PAGE_HEADERS)


@router.get(PREFIX + "/sessions/{session_id}/files/{file_id}")
async def session_file(
    session_id: str, file_id: str, request: Request, engine: EngineDep
) -> Response:
    visitor = await guard.visitor(request)
    session = await engine.sessions.get(visitor.principal.id, session_id)
    download = await engine.files.download(visitor.principal.id, session.container_id, file_id)
    response = download_response(download)
    response.headers.update({**PAGE_HEADERS, **ARTIFACT_HEADERS})  # the artifact's CSP wins
    return response


@router.post(PREFIX + "/sessions/{session_id}/share")
async def share_session(
    session_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    """`enabled=true` publishes the session's link, anything else revokes every link."""
    visitor, fields = await guard.checked_write(request, settings)
    if fields.get("enabled") == "true":
        await engine.shares.publish(visitor.principal.id, session_id)
    else:
        await engine.sessions.get(visitor.principal.id, session_id)
        try:
            await engine.shares.revoke(visitor.principal.id, session_id)
        except ApiError as err:
            if err.status != 404:  # not shared: already what was asked
                raise
    return see_other(_session_url(session_id))


@router.post(PREFIX + "/sessions/{session_id}/cancel")
async def cancel_session(
    session_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    await engine.sessions.cancel(visitor.principal.id, session_id)
    return see_other(_session_url(session_id))


@router.post(PREFIX + "/sessions/{session_id}/delete")
async def delete_session(
    session_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    await engine.sessions.delete(visitor.principal.id, session_id)
    return see_other(PREFIX)
