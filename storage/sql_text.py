"""Plain SQL text and parameters as the PostgreSQL drivers take them: the statement's size
limit, psycopg's parameter style, text without NUL, and libpq's link timeouts. Kept apart from
storage/dialect.py so that the event log's statements (storage/event_batches.py) and the
loop's link (storage/loop_link.py) can use them without importing the dialect back."""

from __future__ import annotations

import functools
import re

# The most parameters one PostgreSQL statement carries (its protocol's limit).
MAX_PARAMETERS = 65_535
# libpq's options that keep a dropped link from hanging a statement, unless the URL sets them.

LINK_TIMEOUTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",  # milliseconds a sent byte may stay unacknowledged
}

_TOKENS = re.compile(r"'(?:[^']|'')*'|::|:(\w+)|\?|%")


@functools.lru_cache(maxsize=1024)
def psycopg_style(statement: str) -> str:
    """A statement written with `?` or `:name` parameters, as psycopg spells them: `%s` and
    `%(name)s`, every literal `%` doubled, quoted literals and `::` casts left alone."""

    def rewrite(token: re.Match[str]) -> str:
        if token.group(1) is not None:
            return f"%({token.group(1)})s"
        if token.group(0) == "?":
            return "%s"
        return token.group(0).replace("%", "%%")

    return _TOKENS.sub(rewrite, statement)


def nul_safe(text: str) -> str:
    """Text PostgreSQL can hold: NUL as U+FFFD (both drivers' parameters go through it)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text
