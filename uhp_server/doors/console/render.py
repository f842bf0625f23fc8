"""The console's HTML: Jinja templates, autoescaped (everything a principal's sessions hold is
hostile until escaped), served under a CSP that allows no inline script or style and nothing
from elsewhere."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: under it a browser sends `Origin: null` with the console's own form
    # posts, and the Origin is what tells them from a forged one (guard.same_origin).
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
ASSETS = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "build.js": "text/javascript; charset=utf-8",  # a build's page, following its log
}

_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def field_id(name: str) -> str:
    """An element id for a form field named by a configuration path (`skills[0].name`)."""
    return "f-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")


_env.filters["field_id"] = field_id


def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _env.get_template(template).render(**context)
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


def fragment(template: str, **context: Any) -> str:
    """A piece of a page, rendered as the page renders it (a live stream sends it)."""
    return _env.get_template(template).render(**context)


def problem(status: int, title: str, message: str, *, signed_in: bool = False) -> HTMLResponse:
    """An error as the console answers it: a page saying what went wrong and where to go."""
    return page("problem.html", status, title=title, message=message, signed_in=signed_in)
