"""What a header value a client configures must be for the gateway to send it upstream."""

from __future__ import annotations


def sendable(value: str) -> bool:
    """Printable ASCII: httpx encodes a header value as ASCII (anything else fails only when
    the header is sent, mid-turn), and a control character would break or split the line."""
    return value.isascii() and value.isprintable()
