"""What hostile clients found (reviews of 2026-12-02), each held to what the contract says:
a clear error in the caller's format and never a 5xx, nothing of a `store: false` turn read
back once it ended, and names and URLs that cannot break what the server does with them."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote

import httpx
import pytest

from harness_bases.events import TurnFailed
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import Hang, answer
from tests.support.in_process import InProcess, in_process
from tests.support.waiting import wait_for
from uhp_server.archive import entry_names
from uhp_server.errors import ApiError
from uhp_server.filenames import MAX_NAME_BYTES, content_disposition, safe_filename
from uhp_server.frontdoors.agentos.holds import HoldFailed, open_hold
from uhp_server.frontdoors.openai_chat.wire import MAX_HEADER_LIST, header_list
from uhp_server.frontdoors.oumi_harness.wire import parse_json, parse_submission
from uhp_server.frontdoors.oumi_tools.calls import Refusal, parse_budget
from uhp_server.gateway.connection import ModelConnection, connection_provider
from uhp_server.gateway.url_policy import UrlRefused, check_config_url, pin_url
from uhp_server.sandbox.ownership import hand_over
from uhp_server.trees import remove_tree

DEEP = b"[" * 5000 + b"]" * 5000


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider):
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, max_request_bytes=64 * 1024
    ) as running:
        yield running


def _cursor(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def test_a_cursor_nested_past_json_depth_is_a_400(server: InProcess) -> None:
    answer_ = await server.client.get("/v1/sessions", params={"cursor": _cursor(DEEP)})
    assert answer_.status_code == 400, answer_.text
    assert answer_.json()["error"]["param"] == "cursor"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
async def test_a_share_body_is_parsed_strictly_whatever_its_content_type(
    server: InProcess, content_type: str
) -> None:
    server.base.script("hi", answer("hi"))
    session_id = (await server.submit("hi")).json()["metadata"]["session_id"]
    url = f"/v1/sessions/{session_id}/share"
    for body in (DEEP, b'{"enabled": NaN}'):
        refused = await server.client.post(
            url, content=body, headers={"content-type": content_type}
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_input"
    published = await server.client.post(
        url, content=b'{"enabled": true}', headers={"content-type": content_type}
    )
    assert published.status_code == 200, published.text


async def test_a_multipart_content_type_does_not_lift_a_json_routes_size_cap(
    server: InProcess,
) -> None:
    body = b"x" * (65 * 1024)
    for path in ("/v1/responses", "/v1/harnesses"):
        answer_ = await server.client.post(
            path, content=body, headers={"content-type": "multipart/form-data; boundary=zz"}
        )
        assert answer_.status_code == 413, (path, answer_.text)


async def test_null_flags_mean_not_set(server: InProcess) -> None:
    server.base.script("nulls", answer("fine"))
    done = await server.submit("nulls", stream=None, store=None, background=None)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"


async def test_a_store_false_response_is_not_read_back_once_it_ended(server: InProcess) -> None:
    server.base.script("secret", answer("secret words"))
    done = (await server.submit("secret", store=False)).json()
    assert done["status"] == "completed" and "secret words" in json.dumps(done)
    assert server.ctx.runs.get(done["id"]) is not None  # its run lingers in memory
    rid = done["id"]
    assert (await server.client.get(f"/v1/responses/{rid}")).status_code == 404
    streamed = await server.client.get(f"/v1/responses/{rid}", params={"stream": "true"})
    assert streamed.status_code == 404, streamed.text
    cancelled = await server.client.post(f"/v1/responses/{rid}/cancel")
    assert cancelled.status_code == 200
    assert "secret words" not in cancelled.text
    assert cancelled.json()["status"] == "completed"


async def test_cancelling_a_running_store_false_turn_still_answers_its_output(
    server: InProcess,
) -> None:
    from harness_bases.events import TextDelta

    server.base.script("partial", [TextDelta("msg", "so far"), Hang()])
    rid = (await server.submit("partial", store=False, background=True)).json()["id"]
    await wait_for(lambda: server.base.turns)
    cancelled = await server.client.post(f"/v1/responses/{rid}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    assert "so far" in cancelled.text


async def test_a_shared_page_never_shows_a_store_false_turn_even_while_it_runs(
    server: InProcess,
) -> None:
    from harness_bases.events import TextDelta

    server.base.script("first", answer("kept answer"))
    first = (await server.submit("first")).json()
    session_id = first["metadata"]["session_id"]
    page_url = (await server.client.post(f"/v1/sessions/{session_id}/share")).json()["url"]
    server.base.script("private prompt", [TextDelta("msg", "private output"), Hang()])
    running = await server.submit(
        "private prompt", store=False, background=True, previous_response_id=first["id"]
    )
    await wait_for(lambda: len(server.base.turns) == 2)
    page = (await server.client.get(page_url)).text
    state = (await server.client.get(f"{page_url}/state")).text
    for shown in (page, state):
        assert "kept answer" in shown
        assert "private prompt" not in shown and "private output" not in shown
    await server.client.post(f"/v1/responses/{running.json()['id']}/cancel")


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
    from uhp_server.frontdoors.openai_chat import turns

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


# -- names, URLs and the doors' own parsing ---------------------------------------------------
@pytest.mark.parametrize("name", ["中" * 100 + ".txt", "💥" * 130 + ".txt", "💥" * 130, "a" * 300])
def test_a_safe_filename_fits_a_file_systems_limit_in_bytes(name: str, tmp_path: Path) -> None:
    safe = safe_filename(name)
    assert len(safe.encode()) <= MAX_NAME_BYTES
    assert safe.endswith(".txt") == name.endswith(".txt")
    (tmp_path / safe).write_text("x")  # and the file system takes it
    (tmp_path / safe.replace(".txt", " (2).txt")).write_text("x")


def test_archive_names_never_repeat_a_name_a_file_really_has() -> None:
    rows = [SimpleNamespace(filename=n) for n in ("a.txt", "a (2).txt", "a.txt", "a.txt")]
    names = entry_names(rows)  # type: ignore[arg-type]
    assert names == ["a.txt", "a (2).txt", "a (3).txt", "a (4).txt"]


def test_archive_names_extract_anywhere_as_they_were_meant() -> None:
    agent_wrote = ("..\\..\\evil.bat", "A.txt", "a.txt", "new\nline.txt", "d/x")
    names = entry_names([SimpleNamespace(filename=n) for n in agent_wrote])  # type: ignore[misc]
    assert names == [".._.._evil.bat", "A.txt", "a (2).txt", "new_line.txt", "d/x"]
    header = content_disposition("..\\..\\evil.bat")
    assert "\\" not in header and "%5C" not in header and header.endswith("''evil.bat")


@pytest.mark.parametrize("host", ["a" * 70 + ".com", "a..com", "a." * 130 + "com"])
async def test_a_host_name_dns_cannot_be_asked_for_is_refused(host: str) -> None:
    with pytest.raises(UrlRefused):
        check_config_url(f"http://{host}/", allow_private=False)
    with pytest.raises(UrlRefused):
        await pin_url(f"http://{host}/", allow_private=False)


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


async def test_input_items_page_the_way_openais_api_does(server: InProcess) -> None:
    server.base.script("three", answer("ok"))
    said = ["one", "two", "three"]
    items = [{"role": "user", "content": text} for text in said]
    rid = (await server.client.post("/v1/responses", json={"input": items})).json()["id"]
    url = f"/v1/responses/{rid}/input_items"

    def texts(page: dict) -> list[str]:
        return [item["content"][0]["text"] for item in page["data"]]

    whole = (await server.client.get(url)).json()
    assert texts(whole) == said and whole["has_more"] is False
    first = (await server.client.get(url, params={"limit": 2, "order": "desc"})).json()
    assert texts(first) == ["three", "two"] and first["has_more"] is True
    rest = (
        await server.client.get(url, params={"order": "desc", "after": first["last_id"]})
    ).json()
    assert texts(rest) == ["one"] and rest["has_more"] is False
    for bad in ({"limit": 0}, {"order": "up"}, {"after": "item_nope"}):
        refused = await server.client.get(url, params=bad)
        assert refused.status_code == 400, (bad, refused.text)


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


@pytest.mark.parametrize("value", ["é", "✨ token", "a\tb", "a\x7fb", " a", "a "])
async def test_a_header_value_the_gateway_could_not_send_is_refused_when_configured(
    server: InProcess, value: str
) -> None:
    mcp = {"name": "m", "url": "https://example.com/mcp", "headers": {"X-Team": value}}
    refused = await server.client.post(
        "/v1/harnesses", json={"base": server.base.name, "mcpServers": [mcp]}
    )
    assert refused.status_code == 400, refused.text
    connection = ModelConnection(
        base_url="https://example.com/v1", api_key="k", model="m", headers={"X-Team": value}
    )
    with pytest.raises(ApiError) as bad:
        connection_provider(connection, allow_private=False)
    assert bad.value.param == "model_connection.headers"


# -- what an agent can leave in its workspace -------------------------------------------------
def _deep_tree(root: Path, depth: int) -> None:
    """`depth` nested folders under root: past PATH_MAX and Python's recursion limit, made
    with descriptors as an agent's loop of mkdir and chdir would."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("dd", dir_fd=fd)
            inner = os.open("dd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)


def test_a_tree_past_path_max_is_removed_whole(tmp_path: Path) -> None:
    _deep_tree(tmp_path / "session", 2200)
    try:
        assert remove_tree(tmp_path / "session")
        assert not (tmp_path / "session").exists()
    finally:  # pytest's own clean-up could not remove it either
        subprocess.run(["rm", "-rf", str(tmp_path / "session")], check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands folders over to the agent's uid")
def test_handing_a_tree_past_path_max_over_never_fails_the_turn(tmp_path: Path) -> None:
    _deep_tree(tmp_path / "workspace", 2200)
    try:
        assert hand_over(1000, 1000, tmp_path / "workspace") > 0
        assert (tmp_path / "workspace").stat().st_uid == 1000
    finally:
        subprocess.run(["rm", "-rf", str(tmp_path / "workspace")], check=False)


async def test_a_header_named_twice_or_a_key_that_cannot_be_sent_is_refused(
    server: InProcess,
) -> None:
    mcp = {"name": "m", "url": "https://example.com/mcp", "headers": {"X-A": "1", "x-a": "2"}}
    refused = await server.client.post(
        "/v1/harnesses", json={"base": server.base.name, "mcpServers": [mcp]}
    )
    assert refused.status_code == 400, refused.text
    for fields, param in (
        ({"api_key": "sk-été"}, "model_connection.api_key"),
        ({"api_key": "sk-x", "headers": {"X-A": "1", "x-a": "2"}}, "model_connection.headers"),
    ):
        connection = ModelConnection(base_url="https://example.com/v1", model="m", **fields)
        with pytest.raises(ApiError) as bad:
            connection_provider(connection, allow_private=False)
        assert bad.value.param == param


async def test_an_own_skill_named_like_a_built_in_in_other_case_replaces_it(
    server: InProcess,
) -> None:
    mine = {"name": "UHP-ARTIFACTS", "content": "---\nname: mine\n---\nmine"}
    made = await server.client.post(
        "/v1/harnesses", json={"base": server.base.name, "skills": [mine]}
    )
    assert made.status_code == 200, made.text
    harness = made.json()
    names = [skill["name"].casefold() for skill in harness["skills"]]
    assert names.count("uhp-artifacts") == 1  # the own one, not the built-in beside it
    again = await server.client.put(f"/v1/harnesses/{harness['id']}", json=harness)
    assert again.status_code == 200, again.text  # a GET→PUT round trip holds


async def test_the_skill_shorthand_has_the_per_file_limit_too(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as server:
        big = {"name": "big", "content": "x" * (2 * 1024 * 1024 + 1)}
        refused = await server.client.post(
            "/v1/harnesses", json={"base": server.base.name, "skills": [big]}
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == "skills[0].content"


async def test_an_idempotent_repeat_of_an_ended_store_false_task_is_the_same_in_any_form(
    server: InProcess,
) -> None:
    server.base.script("kept not", answer("secret words"))
    key = {"Idempotency-Key": "store-false-repeat"}
    first = await server.submit("kept not", store=False, headers=key)
    assert first.json()["status"] == "completed"
    for form in ({}, {"background": True}):  # the first result, as far as it was kept
        again = await server.submit("kept not", store=False, headers=key, **form)
        assert again.status_code == 200, (form, again.text)
        assert again.json()["id"] == first.json()["id"]
        assert again.json()["status"] == "completed" and "secret words" not in again.text
    streamed = await server.submit("kept not", store=False, headers=key, stream=True)
    assert streamed.status_code == 404  # no events were kept to stream
    assert len(server.base.turns) == 1  # and nothing ran again


async def test_an_oumi_cancel_sent_while_its_start_is_accepted_waits_for_it(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.base.script("long", [Hang()])
    harness_id = (await server.client.get("/v1/harnesses")).json()["harnesses"][0]["id"]
    accept = server.ctx.tasks.start

    async def slow_accept(*args: object, **kwargs: object) -> object:
        await asyncio.sleep(0.3)  # the start is still being accepted when the cancel comes
        return await accept(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(server.ctx.tasks, "start", slow_accept)
    ids = {"protocol_version": "1", "session_id": "row-1", "invocation_id": "inv-1"}
    start = {
        **ids,
        "session_action": "start",
        "input_messages": [{"role": "user", "content": "long"}],
        "model_connection": {"base_url": "https://example.com/v1", "model": "m", "api_key": "k"},
    }
    url = f"/oumi/harnesses/{harness_id}"
    submitted = asyncio.create_task(server.client.post(f"{url}/submit", json=start))
    await asyncio.sleep(0.05)
    cancelled = await server.client.post(f"{url}/cancel", json=ids)
    assert cancelled.status_code == 200, cancelled.text  # not 404: that fails the evaluation
    assert cancelled.json()["status"] == "cancelled"
    assert (await submitted).status_code in (200, 202)


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
