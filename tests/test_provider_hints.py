"""Issue 33 §3: a missing model provider is said, not suffered quietly. Started with no provider
for an enabled base, the server warns once (which variables would serve which bases); a task
it then cannot run is refused `422 model_unavailable` naming the setting to set, and one whose
configured provider serves nothing names that provider's settings. Fast: in process."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.fakes import FakeBase, FakeSandbox
from tests.support.server import free_port
from uhp_server.app import create_app
from uhp_server.gateway.provider_hints import enabling_settings
from uhp_server.settings import Settings

KEY = "uhp_sk_provider_hints"
NO_PROVIDER: dict[str, Any] = {
    "OPENAI_API_KEY": None,
    "ANTHROPIC_API_KEY": None,
    "providers_file": None,
}


@pytest.fixture
def warnings() -> Iterator[list[logging.LogRecord]]:
    """The start log's warnings (logging may stop propagation: a handler of our own)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.WARNING)
    logger = logging.getLogger("uhp_server.app")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def _bases() -> dict[str, Any]:
    return {
        "codex": FakeBase(name="codex", wire="responses"),
        "claude-code": FakeBase(name="claude-code", wire="anthropic", backend="anthropic"),
    }


def _refusal(tmp_path: Path, **settings: Any) -> dict[str, Any]:
    config = Settings(data_dir=tmp_path / "data", api_key=KEY, **{**NO_PROVIDER, **settings})
    app = create_app(config, bases=_bases(), sandbox=FakeSandbox())
    with TestClient(app) as client:
        answer = client.post(
            "/v1/responses", json={"input": "hi"}, headers={"Authorization": f"Bearer {KEY}"}
        )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "model_unavailable"
    return error


def _said(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    return [r for r in records if r.getMessage() == "no_model_provider"]


def test_no_provider_is_warned_once_at_start_naming_what_serves_which_base(
    tmp_path: Path, warnings: list[logging.LogRecord]
) -> None:
    config = Settings(data_dir=tmp_path / "data", api_key=KEY, **NO_PROVIDER)
    create_app(config, bases=_bases(), sandbox=FakeSandbox())
    said = _said(warnings)
    assert len(said) == 1
    assert said[0].bases == ["codex", "claude-code"]  # type: ignore[attr-defined]
    hint = said[0].hint  # type: ignore[attr-defined]
    assert "OPENAI_API_KEY would serve all of them" in hint
    assert "ANTHROPIC_API_KEY would serve claude-code" in hint  # not Codex: no translation
    assert "UHP_PROVIDERS_FILE would serve all of them" in hint


def test_a_provider_for_every_base_is_no_warning(
    tmp_path: Path, warnings: list[logging.LogRecord]
) -> None:
    config = Settings(
        data_dir=tmp_path / "data", api_key=KEY, **{**NO_PROVIDER, "OPENAI_API_KEY": "sk-x"}
    )
    create_app(config, bases=_bases(), sandbox=FakeSandbox())
    assert _said(warnings) == []
    # Anthropic alone serves Claude Code, not Codex: that base is named.
    config = config.model_copy(update={"openai_api_key": None, "anthropic_api_key": "sk-ant"})
    create_app(config, bases=_bases(), sandbox=FakeSandbox())
    assert [r.bases for r in _said(warnings)] == [["codex"]]  # type: ignore[attr-defined]


def test_a_task_without_a_provider_names_the_missing_setting(tmp_path: Path) -> None:
    error = _refusal(tmp_path)
    assert error["message"] == (
        "No model provider is configured for this harness's base (codex): set OPENAI_API_KEY, "
        "or add a provider in UHP_PROVIDERS_FILE, then restart the server."
    )


def test_a_task_whose_provider_serves_nothing_names_that_providers_settings(
    tmp_path: Path,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: no model is served
    error = _refusal(tmp_path, OPENAI_API_KEY="sk-x", OPENAI_BASE_URL=dead)
    assert "check openai: OPENAI_BASE_URL, OPENAI_API_KEY" in error["message"]
    assert "127.0.0.1" not in error["message"]  # no address in what a client is shown


def test_which_settings_serve_which_wire() -> None:
    settings = Settings(**NO_PROVIDER)
    assert enabling_settings("responses", settings) == ["OPENAI_API_KEY", "UHP_PROVIDERS_FILE"]
    assert enabling_settings("anthropic", settings) == [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "UHP_PROVIDERS_FILE",
    ]
