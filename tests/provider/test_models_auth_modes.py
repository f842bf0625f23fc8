"""The scripted provider's models, auth, control routes, command line, chat-only mode and
required headers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionContentPartTextParam

from tests.provider.wire_helpers import KEY, MODELS, anthropic_headers
from tests.scripted_provider import RunningProvider, start_provider

# --- models and auth ---------------------------------------------------------------------


def test_models_openai_shape(oai: openai.OpenAI) -> None:
    assert [m.id for m in oai.models.list()] == MODELS


def test_models_anthropic_shape(http: httpx.Client) -> None:
    body = http.get("/v1/models", headers=anthropic_headers()).json()
    assert [m["id"] for m in body["data"]] == MODELS
    assert body["data"][0]["type"] == "model"
    assert body["data"][0]["created_at"] == "2025-01-01T00:00:00Z"
    assert (body["has_more"], body["first_id"], body["last_id"]) == (
        False,
        "gpt-test",
        "claude-test",
    )


def test_auth_openai(provider: RunningProvider, http: httpx.Client) -> None:
    bad = openai.OpenAI(base_url=provider.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        bad.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "invalid_api_key"
    # x-api-key is accepted on OpenAI routes too
    body = {"model": "gpt-test", "input": "SAY yes"}
    answer = http.post("/v1/responses", json=body, headers={"x-api-key": KEY})
    assert answer.json()["output"][0]["content"][0]["text"] == "yes"


def test_auth_anthropic(http: httpx.Client) -> None:
    body = {
        "model": "claude-test",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "x"}],
    }
    denied = http.post("/v1/messages", json=body, headers=anthropic_headers("wrong"))
    assert denied.status_code == 401
    assert denied.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid api key"},
    }
    bearer = {"authorization": f"Bearer {KEY}", "anthropic-version": "2023-06-01"}
    assert http.post("/v1/messages", json=body, headers=bearer).status_code == 200


def test_unknown_model(oai: openai.OpenAI, http: httpx.Client) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        oai.responses.create(model="nope", input="hi")
    assert caught.value.code == "model_not_found"
    body = {"model": "nope", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
    answer = http.post("/v1/messages", json=body, headers=anthropic_headers())
    assert answer.status_code == 404
    assert answer.json()["error"]["type"] == "not_found_error"


# --- control routes and the command line ----------------------------------------------------


def test_control_routes(http: httpx.Client, provider: RunningProvider) -> None:
    http.post(
        "/v1/responses", json={"model": "gpt-test", "input": "SAY a"}, headers={"x-api-key": KEY}
    )
    recorded = http.get("/_scripted/requests").json()
    assert len(recorded) == 1
    assert recorded[0]["path"] == "/v1/responses"
    assert recorded[0]["headers"]["x-api-key"] == KEY
    assert recorded[0]["body"]["input"] == "SAY a"
    assert recorded[0]["script"] == ["SAY a"]
    assert http.post("/_scripted/reset").status_code == 200
    assert provider.requests() == []


def test_module_entry_point_prints_url() -> None:
    command = [sys.executable, "-m", "tests.scripted_provider", "--port", "0", "--api-key", KEY]
    root = Path(__file__).resolve().parents[2]  # the repository, where `tests` is a package
    proc = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening http://127.0.0.1:")
        url = line.split()[1]
        for _ in range(50):
            try:
                models = httpx.get(f"{url}/v1/models", headers={"x-api-key": KEY}).json()
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert [m["id"] for m in models["data"]] == MODELS
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- chat-only mode and required headers -------------------------------------------------------


def test_chat_only_serves_chat_completions_and_nothing_else() -> None:
    with start_provider(KEY, MODELS, chat_only=True) as bare:
        oai = openai.OpenAI(base_url=bare.base_url, api_key=KEY, max_retries=0)
        answer = oai.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "SAY bare"}]
        )
        assert answer.choices[0].message.content == "bare"
        with bare.client() as http:
            for method, path in [
                ("GET", "/v1/models"),
                ("POST", "/v1/responses"),
                ("POST", "/v1/messages"),
                ("POST", "/v1/messages/count_tokens"),
                ("POST", "/v1/completions"),
            ]:
                assert http.request(method, path, json={}).status_code == 404, path
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(
                base_url=bare.base_url, api_key="sk-wrong", max_retries=0
            ).chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": "SAY x"}]
            )


def test_required_headers_are_checked_and_recorded() -> None:
    with start_provider(
        KEY, MODELS, chat_only=True, required_headers={"X-Run-Token": "run-1"}
    ) as p:
        body = {"model": "gpt-test", "messages": [{"role": "user", "content": "SAY ok"}]}
        with p.client() as http:
            assert http.post("/v1/chat/completions", json=body).status_code == 401
            wrong = {"x-run-token": "run-2"}
            assert http.post("/v1/chat/completions", json=body, headers=wrong).status_code == 401
            right = {"x-run-token": "run-1"}
            assert http.post("/v1/chat/completions", json=body, headers=right).status_code == 200
        assert [r["headers"].get("x-run-token") for r in p.requests()] == [None, "run-2", "run-1"]


def test_chat_user_text_parts_are_separate_messages(oai: openai.OpenAI) -> None:
    # The later part's directive wins, as with separate messages (or Anthropic text blocks).
    parts: list[ChatCompletionContentPartTextParam] = [
        {"type": "text", "text": "FAIL 400 old turn"},
        {"type": "text", "text": "SAY new"},
    ]
    answer = oai.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": parts}]
    )
    assert answer.choices[0].message.content == "new"
