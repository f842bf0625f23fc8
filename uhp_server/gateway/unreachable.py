"""What went wrong when a model provider could not be reached, in words a client may see.

"Could not be reached" alone sends a person looking in the wrong place: a name that does
not resolve, a port nobody listens on, a host that never answers and a certificate that does
not verify each have their own fix. Every sentence here is free of addresses and paths.
"""

from __future__ import annotations

import socket
import ssl

import httpx

from uhp_server.gateway.url_policy import (
    MODEL_CONNECTION_SETTING,
    HostNotResolved,
    UrlRefused,
    refusal,
)

DNS_FAILED = "The model provider's host name could not be resolved (DNS failure)."
REFUSED = "The model provider refused the connection (nothing listens at its address)."
TIMED_OUT = "The model provider did not answer in time (timeout)."
TLS_FAILED = "The TLS handshake with the model provider failed (certificate or protocol)."
DROPPED = "The model provider closed the connection without an answer."
UNREACHABLE = "The model provider could not be reached."


def unreachable_message(exc: BaseException) -> str:
    """The sentence for a transport error met calling a provider."""
    if isinstance(exc, httpx.TimeoutException):
        return TIMED_OUT
    causes = list(_chain(exc))
    if any(isinstance(c, ssl.SSLError | ssl.CertificateError) for c in causes):
        return TLS_FAILED
    if any(isinstance(c, socket.gaierror) for c in causes) or _says_dns(str(exc)):
        return DNS_FAILED
    if any(isinstance(c, ConnectionRefusedError) for c in causes) or _says(exc, "refused"):
        return REFUSED
    if any(isinstance(c, TimeoutError) for c in causes):
        return TIMED_OUT
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return DROPPED
    return UNREACHABLE


def refused_address_message(exc: UrlRefused) -> str:
    """The sentence for a connection URL the address policy refused (its reason names no
    address); a name that does not resolve is a DNS failure, not a policy matter."""
    if isinstance(exc, HostNotResolved):
        return DNS_FAILED
    why = refusal(exc, MODEL_CONNECTION_SETTING)
    return f"The model connection's address is not allowed: {why}"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _says(exc: BaseException, word: str) -> bool:
    return any(word in str(c).lower() for c in _chain(exc))


def _says_dns(text: str) -> bool:
    text = text.lower()
    return "name or service not known" in text or "name resolution" in text
