"""What a header value a client configures must be for the gateway to send it upstream."""

from __future__ import annotations


def sendable(value: str) -> bool:
    """Printable ASCII without blank space at either end: httpx encodes a header value as
    ASCII and refuses one that starts or ends with blank space (either fails only when the
    header is sent, mid-turn), and a control character would break or split the line."""
    return value.isascii() and value.isprintable() and value == value.strip()
