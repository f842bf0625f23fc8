"""Reading a console form: URL-encoded, small, each field once."""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import Request

from uhp_server.http.bodies import read_capped

MAX_FORM_BYTES = 64 * 1024  # a key, a filter, a token: never more


class BadForm(Exception):
    """A body that is not a console form: answered 400 with the reason."""


async def read_form(request: Request, limit: int = MAX_FORM_BYTES) -> dict[str, str]:
    """The form's fields; BadForm for another type, a body past the cap, or bytes that are
    not text. A field sent twice keeps its first value."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not kind and not await request.body():
        return {}  # a form with no field: its checks say what is missing
    if kind != "application/x-www-form-urlencoded":
        raise BadForm("This form must be sent as application/x-www-form-urlencoded.")
    body = await read_capped(request, limit)
    if body is None:
        raise BadForm("This form is too large.")
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=False, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadForm("This form is not valid UTF-8 text.") from exc
    fields: dict[str, str] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    return fields
