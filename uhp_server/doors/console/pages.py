"""The console's routes: signing in and out, and the pages behind them.

Every handler acts for `guard.visitor(request)`'s principal through the engine facade, as the
API's handlers act for a bearer token's; every write passes `guard.check_origin`, then
`guard.check_token`. Errors
are pages (render.problem), never the API's JSON: a person reads them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.routing import APIRoute

from uhp_server.doors.console import guard
from uhp_server.doors.console.forms import BadForm, read_form
from uhp_server.doors.console.guard import PREFIX, Forbidden, NotSignedIn
from uhp_server.doors.console.render import ASSETS, PAGE_HEADERS, STATIC_DIR, page, problem
from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.errors import ApiError

SIGN_IN = PREFIX + "/sign-in"


class ConsoleRoute(APIRoute):
    """Answers what goes wrong in a console route as a page: a browser not signed in is sent
    to the sign-in form (a write is refused, its form would be lost), a refused write,
    a bad form or query, or the engine's refusal (another principal's id: not found)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answered(request: Request) -> Response:
            try:
                return await handler(request)
            except NotSignedIn:
                if request.method in ("GET", "HEAD"):
                    return see_other(SIGN_IN)
                return problem(401, "Signed out", "Your sign-in has ended. Sign in again.")
            except Forbidden as refused:
                return problem(403, "Refused", refused.reason)
            except BadForm as bad:
                return problem(400, "Bad request", str(bad))
            except RequestValidationError:
                return problem(400, "Bad request", "This address has a value that is not valid.")
            except ApiError as err:
                return problem(err.status, "Not possible", err.message, signed_in=True)

        return answered


router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


def see_other(location: str) -> Response:
    """After a write, or to the sign-in form: a relative location, so a Host header is never
    echoed back."""
    return RedirectResponse(location, status_code=303, headers=PAGE_HEADERS)


@router.get(PREFIX + "/_assets/{name}")
def console_asset(name: str) -> Response:
    if name not in ASSETS:
        return Response(status_code=404, headers=PAGE_HEADERS)
    headers = {**PAGE_HEADERS, "Cache-Control": "public, max-age=300"}
    return Response((STATIC_DIR / name).read_bytes(), media_type=ASSETS[name], headers=headers)


# -- signing in and out -------------------------------------------------------------------
def _sign_in_form(
    request: Request, settings: SettingsDep, status: int = 200, error: str | None = None
) -> Response:
    form_token = secrets.token_urlsafe(32)
    response = page("sign_in.html", status, form_token=form_token, error=error)
    guard.keep_form_token(response, request, settings, form_token)
    return response


@router.get(SIGN_IN)
async def sign_in_form(request: Request, settings: SettingsDep) -> Response:
    try:
        await guard.visitor(request)
    except NotSignedIn:
        return _sign_in_form(request, settings)
    return see_other(PREFIX)


@router.post(SIGN_IN)
async def sign_in(request: Request, engine: EngineDep, settings: SettingsDep) -> Response:
    guard.check_origin(request, settings)
    fields = await read_form(request)
    guard.check_token(fields.get(guard.CSRF_FIELD), request.cookies.get(guard.FORM_COOKIE, ""))
    key = fields.get("key", "").strip()
    signed = await engine.sign_ins.open(key) if key else None
    if signed is None:
        # The same words for a wrong key and a revoked one, as the API's 401.
        return _sign_in_form(request, settings, 401, "That key is not valid.")
    response = see_other(PREFIX)
    guard.keep_sign_in(response, request, settings, signed, time.time())
    return response


@router.post(PREFIX + "/sign-out")
async def sign_out(request: Request, engine: EngineDep, settings: SettingsDep) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    await engine.sign_ins.close(visitor.cookie)
    response = see_other(SIGN_IN)
    guard.forget_sign_in(response, request, settings)
    return response
