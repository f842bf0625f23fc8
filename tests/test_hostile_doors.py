"""What hostile callers found at the front doors (reviews of 2026-12-02): the Chat
Completions door, the Oumi doors and the AgentOS door, each held to its own contract: its
own error format, never a 5xx, and never a turn run twice for one request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from harness_bases.events import TurnFailed
from tests.scripted_provider import RunningProvider
from tests.support.fakes import Hang, answer
from tests.support.hostile import DEEP, capped_app
from tests.support.in_process import InProcess
from uhp_server.doors.agentos.holds import HoldFailed, open_hold
from uhp_server.doors.openai_chat.wire import MAX_HEADER_LIST, header_list
from uhp_server.doors.oumi_harness.wire import parse_json, parse_submission
from uhp_server.doors.oumi_tools.calls import Refusal, parse_budget
from uhp_server.errors import ApiError


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with capped_app(tmp_path, provider) as running:
        yield running


# -- the Chat Completions door ----------------------------------------------------------------
async def _chat_model(server: InProcess) -> str:
    models = (await server.client.get("/openai/v1/models")).json()["data"]
    return models[0]["id"]


async def test_an_ignored_field_of_any_name_is_named_in_a_header_that_can_be_sent(
    server: InProcess,
) -> None:
    server.base.script("SAY hi", answer("hi"))
    model = await _chat_model(server)
    odd = ["✨", "x\r\nSet-Cookie: a=b", "a, b"]
    body = {"model": model, "messages": [{"role": "user", "content": "SAY hi"}]}
    answer_ = await server.client.post(
        "/openai/v1/chat/completions", json={**body, **dict.fromkeys(odd, 1)}
    )
    assert answer_.status_code == 200, answer_.text
    header = answer_.headers["uhp-ignored-fields"]
    assert "\r" not in header and "\n" not in header and header.isascii()
    assert sorted(unquote(name) for name in header.split(", ")) == sorted(odd)


def test_a_long_list_of_ignored_fields_stays_a_header_clients_read() -> None:
    names = [f"f{n:05d}" + "x" * 200 for n in range(2000)]
    value = header_list(names)
    assert len(value) <= MAX_HEADER_LIST
    *shown, rest = value.split(", ")
    assert shown == names[: len(shown)] and rest == f"+{len(names) - len(shown)} more"
    assert header_list(["a", "b"]) == "a, b"


async def test_a_failed_chat_turn_tells_the_openai_sdk_not_to_run_it_again(
    server: InProcess,
) -> None:
    server.base.script("break", [TurnFailed("upstream said no", "provider_error")])
    model = await _chat_model(server)
    body = {"model": model, "messages": [{"role": "user", "content": "break"}]}
    failed = await server.client.post("/openai/v1/chat/completions", json=body)
    assert failed.status_code == 502, failed.text
    assert failed.headers["x-should-retry"] == "false"
    assert len(server.base.turns) == 1


async def test_an_unexpected_failure_in_the_chat_door_answers_in_openais_shape(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uhp_server.doors.openai_chat import turns

    async def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(turns, "start_turn", broken)
    model = await _chat_model(server)
    body = {"model": model, "messages": [{"role": "user", "content": "x"}]}
    failed = await server.client.post("/openai/v1/chat/completions", json=body)
    assert failed.status_code == 500
    error = failed.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "uhpserver_internal_error"
    assert failed.headers["x-request-id"]


async def test_null_chat_flags_mean_not_set(server: InProcess) -> None:
    server.base.script("SAY hi", answer("hi"))
    model = await _chat_model(server)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "SAY hi"}],
        "stream": None,
        "n": None,
    }
    answer_ = await server.client.post("/openai/v1/chat/completions", json=body)
    assert answer_.status_code == 200, answer_.text


async def test_the_chat_door_names_every_malformed_body_as_openai_does(server: InProcess) -> None:
    for body in (b"{", b'{"model": NaN}', DEEP):
        refused = await server.client.post(
            "/openai/v1/chat/completions",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"


async def test_an_assistants_refusal_in_the_history_is_what_it_said(server: InProcess) -> None:
    server.base.script("again", answer("fine"))
    model = await _chat_model(server)
    refusal = {"role": "assistant", "content": [{"type": "refusal", "refusal": "I won't."}]}
    messages = [{"role": "user", "content": "do it"}, refusal, {"role": "user", "content": "again"}]
    answer_ = await server.client.post(
        "/openai/v1/chat/completions", json={"model": model, "messages": messages}
    )
    assert answer_.status_code == 200, answer_.text
    from_user = {"role": "user", "content": [{"type": "refusal", "refusal": "x"}]}
    refused = await server.client.post(
        "/openai/v1/chat/completions", json={"model": model, "messages": [from_user]}
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "unsupported_content"


async def test_two_chats_with_the_same_history_never_continue_in_each_others_session(
    server: InProcess,
) -> None:
    server.base.script("SAY same", answer("same"))
    server.base.script("SAY next", answer("next"))
    model = await _chat_model(server)
    url = "/openai/v1/chat/completions"
    opening = [{"role": "user", "content": "SAY same"}]
    first = await server.client.post(url, json={"model": model, "messages": opening})
    second = await server.client.post(url, json={"model": model, "messages": opening})
    sessions = {first.headers["uhp-session-id"], second.headers["uhp-session-id"]}
    assert len(sessions) == 2
    history = [*opening, {"role": "assistant", "content": "same"}]
    follow = [*history, {"role": "user", "content": "SAY next"}]
    went_on = await server.client.post(url, json={"model": model, "messages": follow})
    assert went_on.status_code == 200, went_on.text
    # Which of the two it is cannot be told: it starts afresh rather than guess.
    assert went_on.headers["uhp-session-id"] not in sessions


# -- the Oumi doors ---------------------------------------------------------------------------
def test_a_budget_in_other_digits_is_a_refusal() -> None:
    for raw in ("²", "٣", "1e3", "-1", ""):
        with pytest.raises(Refusal):
            parse_budget(raw, 30)
    assert parse_budget("7", 30) == 7


def test_the_oumi_harness_door_parses_strictly_and_checks_tool_calls() -> None:
    for raw in (DEEP, b'{"a": NaN}', b'{"a": "\\ud800"}'):
        with pytest.raises(ApiError) as refused:
            parse_json(raw)
        assert refused.value.status == 400
    for calls in (5, True, "x"):
        body = {
            "protocol_version": "1",
            "action": "submit",
            "session_id": "s",
            "invocation_id": "i",
            "harness": "h",
            "input_messages": [
                {"role": "assistant", "content": "x", "tool_calls": calls},
                {"role": "user", "content": "hi"},
            ],
        }
        with pytest.raises(ApiError) as refused:
            parse_submission(body)
        assert refused.value.status == 400


async def test_an_oumi_cancel_sent_while_its_start_is_accepted_waits_for_it(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.base.script("long", [Hang()])
    harness_id = (await server.client.get("/v1/harnesses")).json()["harnesses"][0]["id"]
    accept = server.ctx.engine.start
    accepting = asyncio.Event()

    async def slow_accept(*args: Any, **kwargs: Any) -> Any:
        accepting.set()
        await asyncio.sleep(0.3)  # the start is still being accepted when the cancel comes
        return await accept(*args, **kwargs)

    monkeypatch.setattr(server.ctx.engine, "start", slow_accept)
    ids = {"protocol_version": "1", "session_id": "row-1", "invocation_id": "inv-1"}
    start = {
        **ids,
        "session_action": "start",
        "input_messages": [{"role": "user", "content": "long"}],
        "model_connection": {"base_url": "https://example.com/v1", "model": "m", "api_key": "k"},
    }
    url = f"/oumi/harnesses/{harness_id}"
    submitted = asyncio.create_task(server.client.post(f"{url}/submit", json=start))
    await asyncio.wait_for(accepting.wait(), 10)  # (a fixed pause lost the race under load)
    cancelled = await server.client.post(f"{url}/cancel", json=ids)
    assert cancelled.status_code == 200, cancelled.text  # not 404: that fails the evaluation
    assert cancelled.json()["status"] == "cancelled"
    assert (await submitted).status_code in (200, 202)


# -- the AgentOS door -------------------------------------------------------------------------
async def test_an_agentos_api_url_passes_the_url_policy_before_any_request() -> None:
    requests: list[httpx.Request] = []

    def platform(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={"id": "hold_1"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(platform)) as http:
        for api_url in ("http://169.254.169.254", "http://127.0.0.1:9", "file:///etc"):
            with pytest.raises(HoldFailed):
                await open_hold(http, api_url, "tok", "Q?", "run", allow_private=False)
        assert requests == []
        hold = await open_hold(http, "http://127.0.0.1:9/", "tok", "Q?", "run", allow_private=True)
        await open_hold(http, "http://[::1]:9/", "tok", "Q?", "run", allow_private=True)
    assert hold == "hold_1"
    assert requests[0].url.path == "/v0/holds" and requests[0].headers["host"] == "127.0.0.1:9"
    assert requests[1].headers["host"] == "[::1]:9"  # an IPv6 host in brackets
