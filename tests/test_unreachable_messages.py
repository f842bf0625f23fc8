"""A provider that cannot be reached: the message says what happened, never "refused"."""

from __future__ import annotations

import socket
import ssl

import httpx

from harness_bases.codex.failures import classify_failure
from uhp_server.gateway import unreachable
from uhp_server.gateway.url_policy import HostNotResolved, UrlRefused


def caused_by(exc: httpx.HTTPError, cause: BaseException) -> httpx.HTTPError:
    exc.__cause__ = cause
    return exc


def test_each_transport_failure_has_its_own_sentence() -> None:
    dns = caused_by(httpx.ConnectError("x"), socket.gaierror(-2, "Name or service not known"))
    refused = caused_by(httpx.ConnectError("x"), ConnectionRefusedError(111, "refused"))
    tls = caused_by(httpx.ConnectError("x"), ssl.SSLCertVerificationError("bad cert"))
    assert unreachable.unreachable_message(dns) == unreachable.DNS_FAILED
    assert unreachable.unreachable_message(refused) == unreachable.REFUSED
    assert unreachable.unreachable_message(tls) == unreachable.TLS_FAILED
    assert unreachable.unreachable_message(httpx.ConnectTimeout("t")) == unreachable.TIMED_OUT
    assert unreachable.unreachable_message(httpx.ReadTimeout("t")) == unreachable.TIMED_OUT
    assert unreachable.unreachable_message(httpx.RemoteProtocolError("r")) == unreachable.DROPPED
    resolved = HostNotResolved("The host name could not be resolved.")  # what pin_url raises for it
    assert unreachable.refused_address_message(resolved) == unreachable.DNS_FAILED
    private = UrlRefused("The URL points at a private or loopback address.")
    assert "private or loopback" in unreachable.refused_address_message(private)


def test_codex_passes_the_gateways_quoted_sentence_on_without_the_url() -> None:
    raw = (
        "unexpected status 502 Bad Gateway: The model provider refused the connection "
        "(nothing listens at its address)., url: http://127.0.0.1:8080/gateway/openai/v1/x"
    )
    failed = classify_failure({"message": raw, "codexErrorInfo": {"httpConnectionFailed": {}}})
    assert failed.code == "provider_error"
    assert failed.message == unreachable.REFUSED
