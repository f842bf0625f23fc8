"""Who a console request acts for, and whether a write may be trusted.

A browser proves it is signed in with its cookie: a random token opening a live sign-in
(engine.sign_ins), never the key. Every write must also prove it comes from the console's
own pages (a cross-site form or script would carry the cookie otherwise): its Origin is the
server's own, and it carries the sign-in's synchronizer token, which only a page of the
console can read. The sign-in form, written before there is a sign-in, carries a token of
its own, set in a cookie beside it (double submit), and the same Origin check.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import Response

from uhp_server.doors.console.forms import MAX_FORM_BYTES, read_form
from uhp_server.engine import Principal, SignIn
from uhp_server.settings import Settings

PREFIX = "/console"
SESSION_COOKIE = "uhp_console"
FORM_COOKIE = "uhp_console_form"  # the sign-in form's own token (before any sign-in)
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
FORM_COOKIE_SECONDS = 3600


class NotSignedIn(Exception):
    """No live sign-in behind this request: a page sends the browser to the sign-in form."""


class Forbidden(Exception):
    """A write that cannot be shown to come from the console's own pages."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Visitor:
    """A signed-in browser: who it acts for, the token its writes carry, its cookie."""

    principal: Principal
    csrf_token: str
    cookie: str
    memories: bool = True  # the Memories chapter is served: its pages are in the navigation


def own_origin(request: Request, settings: Settings) -> str:
    """The origin the console's pages are served from: UHP_PUBLIC_BASE_URL's when set (a
    proxy in front, TLS ended there), else the one this request was made to."""
    if settings.public_base_url:
        parts = urlsplit(settings.public_base_url)
        return f"{parts.scheme}://{parts.netloc}".lower()
    host = request.headers.get("host", "")
    return f"{request.url.scheme}://{host}".lower()


def is_https(request: Request, settings: Settings) -> bool:
    return own_origin(request, settings).startswith("https://")


def same_origin(request: Request, settings: Settings) -> bool:
    """The write was sent by a page of this origin. A browser sends Origin with every POST;
    a request without one is refused rather than guessed at (the console's pages keep
    the browser sending it: Referrer-Policy same-origin, not no-referrer)."""
    origin = request.headers.get("origin")
    return origin is not None and origin.lower() == own_origin(request, settings)


def tokens_match(sent: str | None, expected: str) -> bool:
    if not sent or not expected:
        return False
    return hmac.compare_digest(sent.encode(), expected.encode())


def check_origin(request: Request, settings: Settings) -> None:
    """Forbidden unless the write comes from this origin: asked before its body is read."""
    if not same_origin(request, settings):
        raise Forbidden("This request did not come from the console's own pages.")


def check_token(sent_token: str | None, expected: str) -> None:
    """Forbidden unless the write carries the token its page was given."""
    if not tokens_match(sent_token, expected):
        raise Forbidden("This form has expired or was not sent by the console. Reload the page.")


async def visitor(request: Request) -> Visitor:
    """The signed-in browser behind this request; NotSignedIn otherwise."""
    cookie = request.cookies.get(SESSION_COOKIE, "")
    sign_in: SignIn | None = None
    if cookie:
        sign_in = await request.app.state.engine.sign_ins.live(cookie)
    if sign_in is None:
        raise NotSignedIn()
    memories = request.app.state.engine.settings.memories != "off"
    return Visitor(sign_in.principal, sign_in.csrf_token, cookie, memories)


async def checked_write(
    request: Request, settings: Settings, limit: int = MAX_FORM_BYTES
) -> tuple[Visitor, dict[str, str]]:
    """A signed-in browser's write, shown to come from the console's pages: its Origin
    first (before the body is read), then the sign-in's token in the form or the header.
    The visitor and the form's fields."""
    signed_in = await visitor(request)
    check_origin(request, settings)
    fields = await read_form(request, limit)
    sent = fields.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
    check_token(sent, signed_in.csrf_token)
    return signed_in, fields


def _cookie(
    response: Response, request: Request, settings: Settings, name: str, value: str, age: int
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=age,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=is_https(request, settings),
    )


def keep_sign_in(
    response: Response, request: Request, settings: Settings, sign_in: SignIn, now: float
) -> None:
    """The browser's cookie for a new sign-in, expiring with it."""
    age = max(1, int(sign_in.expires_at - now))
    _cookie(response, request, settings, SESSION_COOKIE, sign_in.token, age)
    response.delete_cookie(FORM_COOKIE, path=PREFIX)


def keep_form_token(response: Response, request: Request, settings: Settings, token: str) -> None:
    _cookie(response, request, settings, FORM_COOKIE, token, FORM_COOKIE_SECONDS)


def forget_sign_in(response: Response, request: Request, settings: Settings) -> None:
    response.delete_cookie(
        SESSION_COOKIE,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=is_https(request, settings),
    )
