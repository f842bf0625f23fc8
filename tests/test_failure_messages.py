"""Failure messages from every base are safe to show: no host, address or path (Errors §1)."""

from __future__ import annotations

import pytest

from harness_bases.codex.failures import classify_failure
from harness_bases.messages import PROVIDER_REFUSED, safe_message

GATEWAY = "http://127.0.0.1:40123/gateway/openai/v1/responses"


@pytest.mark.parametrize(
    "text",
    [
        f"request failed, url: {GATEWAY}",
        "could not read /home/agent/.codex/config.toml",
        "connect to uhp-server:8080 refused",
        "dial 10.1.2.3 failed",
        "localhost refused the connection",
        "C:\\temp\\x",
    ],
)
def test_revealing_text_is_replaced(text: str) -> None:
    assert safe_message(text, "plain") == "plain"


def test_plain_text_is_kept() -> None:
    assert safe_message("The model is overloaded.", "plain") == "The model is overloaded."
    assert safe_message("", "plain") == "plain"


def test_codex_http_failure_keeps_the_providers_message_without_the_url() -> None:
    raw = (
        'unexpected status 424 Failed Dependency: {"error": {"message": "The model provider '
        'refused the server\'s credential.", "type": "provider_credential_refused"}}, '
        f"url: {GATEWAY}"
    )
    failed = classify_failure({"message": raw, "codexErrorInfo": "other"})
    assert failed.code == "provider_error"
    assert failed.message == "The model provider refused the server's credential."


def test_codex_failure_naming_the_gateway_is_replaced() -> None:
    failed = classify_failure(
        {"message": f"stream disconnected, url: {GATEWAY}", "codexErrorInfo": "other"}
    )
    assert "127.0.0.1" not in failed.message and "/" not in failed.message
    harness = classify_failure({"message": "panic at /src/main.rs:10"})
    assert harness.code == "harness_error" and "/" not in harness.message
    assert PROVIDER_REFUSED.endswith(".")
