"""Failure messages a client may see: the CLI's words, unless they could reveal internals.

A CLI's error text often carries the URL it called (the gateway's internal address), a file
path or a host:port. Errors §1 forbids all three in a message, so such text is replaced by a
plain sentence; the full text stays in the server's log.
"""

from __future__ import annotations

import re

# Anything that could name a host, an address or a file.
_REVEALING = re.compile(r"/|\\|://|\b\d{1,3}(?:\.\d{1,3}){3}\b|\b[\w.-]+:\d{2,5}\b|localhost")

PROVIDER_REFUSED = "The model provider refused the request."
# A native session that could not be resumed; the turn runs in a new one and says so.
RESUME_FAILED_NOTICE = "The earlier conversation could not be resumed; this turn starts a new one."


def reveals_internals(text: str) -> bool:
    return bool(_REVEALING.search(text))


def safe_message(text: str | None, fallback: str) -> str:
    """`text` when it is non-empty and names no host, address or path; else `fallback`."""
    text = (text or "").strip()
    if text and not reveals_internals(text):
        return text
    return fallback
