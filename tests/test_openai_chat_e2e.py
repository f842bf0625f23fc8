"""The Chat Completions door with the official `openai` SDK's chat API, on the base under test."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageParam,
    ChatCompletionUserMessageParam,
)

from tests.conftest import API_KEY
from tests.scripted_provider import RunningProvider
from tests.support import passes
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

SESSION = "UHP-Session-Id"


@pytest.fixture
def sdk(server: ServerProcess) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=f"{server.url}/openai/v1", api_key=API_KEY, max_retries=0)
    yield client
    client.close()


@pytest.fixture
def model(sdk: openai.OpenAI) -> str:
    return sdk.models.list().data[0].id


def user(text: str) -> ChatCompletionUserMessageParam:
    return {"role": "user", "content": text}


def assistant(text: str) -> ChatCompletionAssistantMessageParam:
    return {"role": "assistant", "content": text}


def chat(
    sdk: openai.OpenAI, model: str, messages: list[ChatCompletionMessageParam], **extra: Any
) -> Any:
    """A blocking completion, with the response headers alongside."""
    raw = sdk.chat.completions.with_raw_response.create(model=model, messages=messages, **extra)
    return raw.parse(), raw.headers


def reasoning_of(message: Any) -> str:
    return (message.model_extra or {}).get("reasoning_content") or ""


@passes.same_on_every_base
def test_models_are_the_principals_harnesses(sdk: openai.OpenAI, client: httpx.Client) -> None:
    harnesses = client.get("/v1/harnesses").json()["harnesses"]
    models = sdk.models.list().data
    assert len(models) == len(harnesses)
    for harness, listed in zip(harnesses, models, strict=True):
        assert listed.id.endswith("--" + harness["id"]) and listed.object == "model"
        assert listed.id.split("--")[0].isascii() and " " not in listed.id
        assert sdk.models.retrieve(listed.id).id == listed.id


def test_a_blocking_answer_in_openais_shape_is_an_ordinary_session(
    sdk: openai.OpenAI, model: str, client: httpx.Client
) -> None:
    answer, headers = chat(sdk, model, [user("SAY hello from the chat door")])
    assert answer.object == "chat.completion" and answer.id.startswith("chatcmpl-")
    assert answer.model == model
    choice = answer.choices[0]
    assert choice.message.role == "assistant" and choice.finish_reason == "stop"
    assert choice.message.content == "hello from the chat door"
    assert answer.usage is not None and answer.usage.completion_tokens > 0
    assert answer.usage.total_tokens >= answer.usage.prompt_tokens + answer.usage.completion_tokens
    session_id = headers[SESSION]
    listed = client.get("/v1/sessions?limit=100").json()["sessions"]
    assert session_id in [s["id"] for s in listed]
    turns = client.get(f"/v1/sessions/{session_id}/turns").json()
    assert "hello from the chat door" in json.dumps(turns)
    share = client.post(f"/v1/sessions/{session_id}/share")
    assert share.status_code in (200, 201), share.text


def test_streaming_with_usage_in_openais_chunk_shapes(
    sdk: openai.OpenAI, model: str, server: ServerProcess
) -> None:
    stream = sdk.chat.completions.create(
        model=model,
        messages=[user("SAY streamed through the door")],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed through the door"
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None and usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])
    # The raw stream: `data:` lines only, ending in [DONE]; without include_usage, no usage.
    raw = httpx.post(
        f"{server.url}/openai/v1/chat/completions",
        headers={"Authorization": f"Bearer {API_KEY}"},
        json={"model": model, "messages": [user("SAY raw")], "stream": True},
        timeout=120,
    )
    assert raw.headers["content-type"].startswith("text/event-stream")
    data = [line[6:] for line in raw.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert all("usage" not in json.loads(d) for d in data[:-1])


def test_tool_use_and_reasoning_arrive_as_reasoning_content(sdk: openai.OpenAI, model: str) -> None:
    script = "THINK weighing the listing\nRUN echo door-check-output\nSAY listed"
    answer, _ = chat(sdk, model, [user(script)])
    assert answer.choices[0].message.content == "listed"
    reasoning = reasoning_of(answer.choices[0].message)
    assert "→ " in reasoning and "echo door-check-output" in reasoning
    assert "← " in reasoning and "door-check-output" in reasoning.split("← ", 1)[1]
    chunks = list(sdk.chat.completions.create(model=model, messages=[user(script)], stream=True))
    streamed = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert "echo door-check-output" in streamed
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "listed"


@passes.same_on_every_base
def test_request_tools_and_sampling_are_accepted_and_named_as_ignored(
    sdk: openai.OpenAI, model: str
) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    answer, headers = chat(
        sdk,
        model,
        [user("SAY tools ignored")],
        tools=[tool],
        tool_choice="auto",
        temperature=0.2,
        max_tokens=50,
    )
    assert answer.choices[0].message.content == "tools ignored"
    ignored = [name.strip() for name in headers["UHP-Ignored-Fields"].split(",")]
    assert ignored == ["max_tokens", "temperature", "tool_choice", "tools"]


def test_a_conversation_continues_in_the_same_session_and_workspace(
    sdk: openai.OpenAI, model: str
) -> None:
    first_ask = user("RUN echo kept-in-workspace > note.txt\nSAY saved")
    first, first_headers = chat(sdk, model, [first_ask])
    said = first.choices[0].message.content
    assert said.startswith("saved")
    # The client strips whitespace and folds its reasoning into the text: still a match.
    history: list[ChatCompletionMessageParam] = [
        first_ask,
        assistant("<think>hmm</think>\n" + said.replace("\n", "\n\n  ")),
    ]
    ask = user("RUN cat note.txt\nSAY {output}")
    second, second_headers = chat(sdk, model, [*history, ask])
    assert second_headers[SESSION] == first_headers[SESSION]
    assert second.choices[0].message.content == "kept-in-workspace"
    _, third_headers = chat(
        sdk, model, [*history, ask, assistant(second.choices[0].message.content), user("SAY 3")]
    )
    assert third_headers[SESSION] == first_headers[SESSION]
    # Regenerating the second answer forks: the first session's agent has moved on.
    _, again_headers = chat(sdk, model, [*history, ask])
    assert again_headers[SESSION] != first_headers[SESSION]


@passes.same_on_every_base
def test_an_unseen_history_starts_a_new_session_with_it_as_the_opening(
    sdk: openai.OpenAI, model: str, provider: RunningProvider
) -> None:
    history: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are terse, always."},
        user("what is the code word?"),
        assistant("The code word is marmalade-42."),
    ]
    provider.reset()
    answer, headers = chat(sdk, model, [*history, user("SAY opening seen")])
    assert answer.choices[0].message.content == "opening seen"
    # The agent was given the earlier conversation, and the system message as instructions.
    sent = json.dumps([entry["body"] for entry in provider.requests()])
    assert "marmalade-42" in sent and "what is the code word?" in sent
    assert "You are terse, always." in sent
    session_id = headers[SESSION]
    _, follow_headers = chat(
        sdk, model, [*history, user("SAY opening seen"), assistant("opening seen"), user("SAY x")]
    )
    assert follow_headers[SESSION] == session_id
    # The same unseen history again is a second new session, not the first one's.
    _, again_headers = chat(sdk, model, [*history, user("SAY opening seen")])
    assert again_headers[SESSION] != session_id


@passes.same_on_every_base
def test_a_deleted_conversation_is_not_continued(
    sdk: openai.OpenAI, model: str, client: httpx.Client
) -> None:
    ask = user("a question with no directive")  # answered "ok"
    first, headers = chat(sdk, model, [ask])
    deleted = client.delete(f"/v1/traces/{headers[SESSION]}")
    assert deleted.status_code == 200, deleted.text
    history: list[ChatCompletionMessageParam] = [
        ask,
        assistant(first.choices[0].message.content),
        user("SAY after"),
    ]
    after, after_headers = chat(sdk, model, history)
    assert after.choices[0].message.content == "after"
    assert after_headers[SESSION] != headers[SESSION]


@passes.same_on_every_base
def test_produced_files_are_listed_as_download_links(sdk: openai.OpenAI, model: str) -> None:
    answer, _ = chat(sdk, model, [user("RUN printf 'door file' > report.md\nSAY wrote it")])
    content = answer.choices[0].message.content
    text, _, listing = content.partition("\n\nFiles:\n")
    assert text == "wrote it"
    assert listing.startswith("- [report.md](http") and listing.endswith("/content)")
    url = listing.split("](", 1)[1].rstrip(")")
    download = httpx.get(url, headers={"Authorization": f"Bearer {API_KEY}"})
    assert download.status_code == 200 and download.content == b"door file"


def _error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@passes.same_on_every_base
def test_errors_are_in_openais_shape(sdk: openai.OpenAI, model: str, server: ServerProcess) -> None:
    bad = openai.OpenAI(base_url=str(sdk.base_url), api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        bad.chat.completions.create(model=model, messages=[user("SAY x")])
    assert caught.value.code == "invalid_api_key"
    with pytest.raises(openai.NotFoundError) as missing:
        sdk.chat.completions.create(model="no-such-model", messages=[user("SAY x")])
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(model=model, messages=[user("SAY x")], n=2)
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(model=model, messages=[user("hi"), assistant("prefill")])
    url = f"{server.url}/openai/v1"
    auth = {"Authorization": f"Bearer {API_KEY}"}
    cases = [
        (httpx.post(f"{url}/chat/completions", headers=auth, content=b"{nope"), 400),
        (httpx.post(f"{url}/chat/completions", headers=auth, json={"model": model}), 400),
        (
            httpx.post(
                f"{url}/chat/completions",
                headers=auth,
                json={"model": model, "messages": [{"role": "wizard", "content": "x"}]},
            ),
            400,
        ),
        (
            httpx.post(
                f"{url}/chat/completions",
                headers=auth,
                json={"model": model, "messages": [user("x")], "temperature": "hot"},
            ),
            400,
        ),
        (httpx.get(f"{url}/models"), 401),
        (httpx.get(f"{url}/nowhere", headers=auth), 404),
        (httpx.get(f"{url}/chat/completions", headers=auth), 405),
    ]
    assert cases[-1][0].headers["allow"] == "POST"
    for response, status in cases:
        assert response.status_code == status, response.text
        error = _error_of(response)
        assert error["type"] == ("invalid_request_error") and error["message"]


@passes.same_on_every_base
def test_a_failed_task_is_an_error_blocking_and_streamed(sdk: openai.OpenAI, model: str) -> None:
    ask = [user("FAIL 400 upstream says no")]
    with pytest.raises(openai.APIStatusError) as blocking:
        sdk.chat.completions.create(model=model, messages=ask)
    assert blocking.value.status_code == 502
    refused = blocking.value.body  # (the error's JSON, typed `object`)
    assert isinstance(refused, dict)
    assert refused["message"] and refused["type"] == "server_error"
    with pytest.raises(openai.APIError) as streamed:
        list(sdk.chat.completions.create(model=model, messages=ask, stream=True))
    assert isinstance(streamed.value.body, dict)
    assert streamed.value.body["code"] == refused["code"]


@passes.same_on_every_base
def test_another_principal_neither_sees_nor_continues_it(
    sdk: openai.OpenAI, model: str, server: ServerProcess, other_key: str
) -> None:
    ask = user("SAY private answer")
    first, headers = chat(sdk, model, [ask])
    other = openai.OpenAI(base_url=str(sdk.base_url), api_key=other_key, max_retries=0)
    other_models = [m.id for m in other.models.list().data]
    assert model not in other_models and other_models
    with pytest.raises(openai.NotFoundError):
        other.chat.completions.create(model=model, messages=[ask])
    history: list[ChatCompletionMessageParam] = [
        ask,
        assistant(first.choices[0].message.content),
        user("SAY next"),
    ]
    _, other_headers = chat(other, other_models[0], history)
    assert other_headers[SESSION] != headers[SESSION]
    sessions = httpx.get(
        f"{server.url}/v1/sessions?limit=100", headers={"Authorization": f"Bearer {other_key}"}
    ).json()["sessions"]
    assert headers[SESSION] not in [s["id"] for s in sessions]
    other.close()


@passes.same_on_every_base
def test_leaving_a_stream_cancels_the_task(
    sdk: openai.OpenAI, model: str, client: httpx.Client
) -> None:
    stream = sdk.chat.completions.with_raw_response.create(
        model=model, messages=[user("SLOW 20\nSAY " + "slowly " * 40)], stream=True
    )
    response_id = stream.headers["UHP-Response-Id"]
    chunks = stream.parse()
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    chunks.close()
    deadline = time.monotonic() + 15
    status = ""
    while time.monotonic() < deadline:
        status = client.get(f"/v1/responses/{response_id}").json()["status"]
        if status != "in_progress":
            break
        time.sleep(0.2)
    assert status == "cancelled"
