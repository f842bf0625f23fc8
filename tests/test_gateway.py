"""The model gateway against a fake upstream that records what reached it."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from harness_bases.messages import PROVIDER_REFUSED
from tests.support.translations import translation_between
from uhp_server.gateway import (
    TokenRegistry,
    Upstreams,
    UsageTotals,
    gateway_path,
    make_gateway_router,
    proxy,
)
from uhp_server.gateway.confine import Confined, confine
from uhp_server.gateway.proxy import refusal_message
from uhp_server.sandbox.gateway_door import gateway_only
from uhp_server.settings import Settings

OPENAI_KEY = "sk-real-openai-key-123"
ANTHROPIC_KEY = "sk-ant-real-key-456"
RESPONSES_USAGE = {
    "input_tokens": 100,
    "output_tokens": 20,
    "total_tokens": 120,
    "input_tokens_details": {"cached_tokens": 40},
    "output_tokens_details": {"reasoning_tokens": 7},
}
CHAT_USAGE = {
    "prompt_tokens": 50,
    "completion_tokens": 5,
    "total_tokens": 55,
    "prompt_tokens_details": {"cached_tokens": 10},
    "completion_tokens_details": {"reasoning_tokens": 2},
}
ANTHROPIC_START_USAGE = {
    "input_tokens": 10,
    "cache_read_input_tokens": 200,
    "cache_creation_input_tokens": 30,
    "output_tokens": 1,
}


# --- the fake upstream -----------------------------------------------------------------


def sse(*events: dict[str, Any]) -> list[bytes]:
    return [f"event: {e.get('type', 'x')}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def responses_events(usage: dict | None) -> list[bytes]:
    return sse(
        {"type": "response.created", "response": {"id": "r1", "usage": None}},
        {"type": "response.output_text.delta", "delta": "hello usage"},
        {"type": "response.completed", "response": {"id": "r1", "usage": usage}},
    )


def chat_chunks() -> list[bytes]:
    chunk = {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "hi"}}]}
    return [
        f"data: {json.dumps({**chunk, 'usage': None})}\n\n".encode(),
        f"data: {json.dumps({**chunk, 'choices': [], 'usage': CHAT_USAGE})}\n\n".encode(),
        b"data: [DONE]\n\n",
    ]


def anthropic_events() -> list[bytes]:
    return sse(
        {"type": "message_start", "message": {"id": "m1", "usage": ANTHROPIC_START_USAGE}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 15},
        },
        {"type": "message_stop"},
    )


class FakeUpstream:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.second_sent_at = 0.0
        self.app = FastAPI()
        self.app.add_api_route("/{path:path}", self.handle, methods=["GET", "POST"])

    async def handle(self, path: str, request: Request) -> Response:
        raw = await request.body()
        body = json.loads(raw) if raw else {}
        self.requests.append(
            {
                "path": path,
                "query": str(request.query_params),
                "headers": dict(request.headers),
                "raw": raw,
                "body": body,
            }
        )
        scenario = body.get("x_scenario", "")
        stream = body.get("stream", False)
        if scenario == "echo_key":
            return JSONResponse({"error": {"message": f"bad thing with {OPENAI_KEY}"}}, 400)
        if scenario == "echo_key_escaped":  # every other character a JSON \\u escape
            message = f'{{"error": {{"message": "bad key {_json_escaped(OPENAI_KEY)}"}}}}'
            return Response(message.encode(), 400, media_type="application/json")
        if scenario == "echo_key_stream":  # mid-stream, the escaped key cut between chunks
            event = f'data: {{"type": "error", "message": "{_json_escaped(OPENAI_KEY)}"}}\n\n'
            cut = len(event) // 2
            parts = [b"data: {}\n\n", event[:cut].encode(), event[cut:].encode()]
            return self._stream(parts)
        if scenario == "echo_key_header":  # a debug header repeating what it was sent
            echoed = {"x-request-id": f"req-1 key={OPENAI_KEY}", "x-ratelimit-note": OPENAI_KEY}
            if stream:
                return self._stream(responses_events(RESPONSES_USAGE), echoed)
            return JSONResponse({"error": {"message": "bad"}}, 400, headers=echoed)
        if scenario == "upstream_401":
            return JSONResponse({"error": {"message": f"Incorrect API key {OPENAI_KEY}"}}, 401)
        if scenario == "slow":
            return StreamingResponse(self._slow(), media_type="text/event-stream")
        if path == "v1/models":
            return JSONResponse({"data": [{"id": "model-a"}, {"id": "model-b"}]})
        if path == "v1/responses":
            usage = None if scenario == "no_usage" else RESPONSES_USAGE
            if stream:
                return self._stream(responses_events(usage))
            return JSONResponse({"object": "response", "id": "r1", "usage": usage})
        if path == "v1/chat/completions":
            if stream:
                return self._stream(chat_chunks())
            return JSONResponse({"object": "chat.completion", "usage": CHAT_USAGE})
        if path == "v1/messages":
            if stream:
                return self._stream(anthropic_events())
            usage = {**ANTHROPIC_START_USAGE, "output_tokens": 15}
            return JSONResponse({"type": "message", "id": "m1", "usage": usage})
        return JSONResponse({"error": "unexpected"}, 500)

    @staticmethod
    def _stream(parts: list[bytes], headers: dict[str, str] | None = None) -> StreamingResponse:
        async def gen() -> AsyncIterator[bytes]:
            for p in parts:
                yield p

        return StreamingResponse(gen(), media_type="text/event-stream", headers=headers)

    async def _slow(self) -> AsyncIterator[bytes]:
        yield b"data: first\n\n"
        await asyncio.sleep(0.5)
        self.second_sent_at = time.monotonic()
        yield b"data: second\n\n"


def _json_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(text))


class ServerThread:
    """A uvicorn server on a free loopback port in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.server.started
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[FakeUpstream, str]]:
    fake = FakeUpstream()
    with ServerThread(fake.app) as srv:
        yield fake, srv.url


def make_settings(openai_base: str, anthropic_base: str, **extra: Any) -> Settings:
    return Settings(
        OPENAI_API_KEY=OPENAI_KEY,
        OPENAI_BASE_URL=openai_base,
        ANTHROPIC_API_KEY=ANTHROPIC_KEY,
        ANTHROPIC_BASE_URL=anthropic_base,
        openai_default_model=None,
        anthropic_default_model=None,
        **extra,
    )


def gateway_app(tokens: TokenRegistry, upstreams: Upstreams) -> FastAPI:
    app = FastAPI()
    app.include_router(make_gateway_router(tokens, upstreams))
    return app


@pytest.fixture
def tokens() -> TokenRegistry:
    return TokenRegistry()


@pytest.fixture
async def client(
    upstream: tuple[FakeUpstream, str], tokens: TokenRegistry
) -> AsyncIterator[httpx.AsyncClient]:
    fake, url = upstream
    fake.requests.clear()
    # Anthropic's base URL without /v1 and OpenAI's with a trailing slash: both normalised.
    upstreams = Upstreams(make_settings(f"{url}/v1/", url))
    transport = httpx.ASGITransport(app=gateway_app(tokens, upstreams))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
        yield c
    await upstreams.aclose()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


OPENAI = gateway_path("openai")
ANTHROPIC = gateway_path("anthropic") + "/v1"


# --- credentials and model ---------------------------------------------------------------


async def test_key_swapped_and_model_rewritten(
    client: httpx.AsyncClient, tokens: TokenRegistry, upstream: tuple[FakeUpstream, str]
) -> None:
    grant = tokens.issue("openai", "gpt-turn-model", 60)
    headers = {
        **bearer(grant.token),
        "openai-organization": "org-x",
        "cookie": "a=b",
        "x-evil": "1",
        "openai-beta": "responses=v1",
    }
    r = await client.post(
        f"{OPENAI}/responses", headers=headers, json={"model": "gpt-other", "input": "hi"}
    )
    assert r.status_code == 200
    seen = upstream[0].requests[-1]
    assert seen["path"] == "v1/responses"
    assert seen["headers"]["authorization"] == f"Bearer {OPENAI_KEY}"
    assert grant.token not in json.dumps(seen["headers"]) + seen["raw"].decode()
    for h in ("openai-organization", "cookie", "x-evil", "x-api-key"):
        assert h not in seen["headers"]
    assert seen["headers"]["openai-beta"] == "responses=v1"
    assert seen["body"] == {"model": "gpt-turn-model", "input": "hi"}


async def test_a_model_call_keeps_only_the_tools_the_agent_runs_itself(
    client: httpx.AsyncClient, tokens: TokenRegistry, upstream: tuple[FakeUpstream, str]
) -> None:
    """Hosted tools, background runs and the account's stored state would act outside the
    sandbox with the server's key (gateway/confine.py): they never reach the provider."""
    own = [
        {"type": "function", "name": "exec_command", "parameters": {}},
        {"type": "custom", "name": "apply_patch"},
        {"type": "namespace", "name": "mcp", "tools": [{"type": "function", "name": "t"}]},
    ]
    hosted = [
        {"type": "web_search", "external_web_access": False},
        {"type": "mcp", "server_label": "x", "server_url": "https://attacker.example/mcp"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]},
    ]
    body = {
        "model": "m",
        "input": "hi",
        "tools": own + hosted,
        "tool_choice": {"type": "web_search"},
        "background": True,
        "previous_response_id": "resp_someone_elses",
        "conversation": "conv_1",
        "prompt": {"id": "pmpt_1"},
    }
    grant = tokens.issue("openai", "m", 60)
    r = await client.post(f"{OPENAI}/responses", headers=bearer(grant.token), json=body)
    assert r.status_code == 200
    assert upstream[0].requests[-1]["body"] == {"model": "m", "input": "hi", "tools": own}
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "web_search_options": {},
        "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "retrieval"}],
    }
    r = await client.post(f"{OPENAI}/chat/completions", headers=bearer(grant.token), json=chat)
    seen = upstream[0].requests[-1]["body"]
    assert "web_search_options" not in seen
    assert seen["tools"] == [{"type": "function", "function": {"name": "f"}}]
    a = tokens.issue("anthropic", "m", 60)
    messages = {
        "max_tokens": 5,
        "messages": [],
        "tools": [
            {"name": "Bash", "input_schema": {}},
            {"type": "bash_20250124", "name": "bash"},
            {"type": "web_search_20250305", "name": "web_search"},
            {"type": "web_fetch_20250910", "name": "web_fetch"},
            {"type": "code_execution_20250825", "name": "code_execution"},
        ],
        "tool_choice": {"type": "tool", "name": "web_search"},
        "mcp_servers": [{"type": "url", "url": "https://attacker.example/mcp", "name": "x"}],
        "container": "container_1",
    }
    r = await client.post(f"{ANTHROPIC}/messages", headers={"x-api-key": a.token}, json=messages)
    seen = upstream[0].requests[-1]["body"]
    assert [tool["name"] for tool in seen["tools"]] == ["Bash", "bash"]
    for gone in ("tool_choice", "mcp_servers", "container"):
        assert gone not in seen


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("responses", {"type": "input_image", "image_url": "https://attacker.example/a.png?d=x"}),
        ("responses", {"type": "input_image", "file_id": "file-account"}),
        ("responses", {"type": "input_file", "file_url": "https://attacker.example/a.pdf"}),
        ("responses", {"type": "input_file", "file_id": "file-account"}),
        ("chat/completions", {"type": "image_url", "image_url": {"url": "https://x.example/c"}}),
        ("chat/completions", {"type": "file", "file": {"file_id": "file-account"}}),
    ],
)
async def test_content_the_provider_would_fetch_or_look_up_never_reaches_it(
    client: httpx.AsyncClient,
    tokens: TokenRegistry,
    upstream: tuple[FakeUpstream, str],
    path: str,
    content: dict,
) -> None:
    grant = tokens.issue("openai", "m", 60)
    if path == "responses":
        body: dict = {"input": [{"role": "user", "content": [content]}]}
    else:
        body = {"messages": [{"role": "user", "content": [content]}]}
    r = await client.post(f"{OPENAI}/{path}", headers=bearer(grant.token), json=body)
    assert r.status_code == 200, r.text  # the call goes on, and so can its conversation
    sent = upstream[0].requests[-1]["raw"].decode()
    assert "example" not in sent and "file-account" not in sent
    assert "was not sent: this model gateway forwards inline content only" in sent
    inline = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    ok = {"input": [{"role": "user", "content": [inline]}]}
    await client.post(f"{OPENAI}/responses", headers=bearer(grant.token), json=ok)
    assert upstream[0].requests[-1]["body"]["input"] == ok["input"]


async def test_stored_items_and_fetched_documents_never_reach_the_provider(
    client: httpx.AsyncClient, tokens: TokenRegistry, upstream: tuple[FakeUpstream, str]
) -> None:
    reference = {"input": [{"type": "item_reference", "id": "msg_stored"}]}
    o = bearer(tokens.issue("openai", "m", 60).token)
    await client.post(f"{OPENAI}/responses", headers=o, json=reference)
    [stand_in] = upstream[0].requests[-1]["body"]["input"]  # an item: a message saying so
    assert stand_in["role"] == "user" and "not sent" in stand_in["content"][0]["text"]
    a = {"x-api-key": tokens.issue("anthropic", "m", 60).token}
    for block in (
        {"type": "document", "source": {"type": "url", "url": "https://x.example/d.pdf"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
        {"type": "container_upload", "file_id": "file_1"},
        {
            "type": "tool_result",
            "tool_use_id": "t",
            "content": [{"type": "image", "source": {"type": "url", "url": "https://x.example"}}],
        },
    ):
        body = {"max_tokens": 5, "messages": [{"role": "user", "content": [block]}]}
        r = await client.post(f"{ANTHROPIC}/messages", headers=a, json=body)
        assert r.status_code == 200, (block, r.text)
        sent = upstream[0].requests[-1]["raw"].decode()
        assert "x.example" not in sent and "file_1" not in sent, block
        assert "not sent" in sent
    odd = {"max_tokens": 5, "messages": [], "tools": [{"type": "WEB_SEARCH_20250305", "name": "w"}]}
    r = await client.post(f"{ANTHROPIC}/messages", headers=a, json=odd)
    assert "tools" not in upstream[0].requests[-1]["body"]  # unknown types run at Anthropic
    not_a_list = {"model": "m", "input": "hi", "tools": {"type": "web_search"}}
    await client.post(f"{OPENAI}/responses", headers=o, json=not_a_list)
    assert "tools" not in upstream[0].requests[-1]["body"]
    surrogate = b'{"model": "m", "input": "\\ud800"}'
    r = await client.post(
        f"{OPENAI}/responses", headers={**o, "content-type": "application/json"}, content=surrogate
    )
    assert r.status_code == 400, r.text


def test_a_fetch_is_replaced_wherever_it_sits_and_inline_content_passes() -> None:
    """Codex sends a viewed image inside a tool's output: every place is walked."""
    url_image = {"type": "input_image", "image_url": "https://attacker.example/x.png"}
    inline = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    call = {"type": "function_call", "call_id": "c", "name": "view_image", "arguments": "{}"}

    def output(part: dict) -> dict:
        return {"input": [call, {"type": "function_call_output", "call_id": "c", "output": [part]}]}

    fetched_file = {"fileData": {"fileUri": "https://x.example/a"}}
    gemini_output = {"functionResponse": {"name": "f", "response": {}, "parts": [fetched_file]}}
    url_source = {"type": "image", "source": {"type": "URL", "url": "https://x.example"}}
    document = {"type": "document", "source": {"type": "content", "content": [url_source]}}
    refused = [
        ("responses", output(url_image)),
        ("responses", output({"type": "input_file", "file_id": "file-account"})),
        ("responses", {"instructions": [{"role": "system", "content": [url_image]}]}),
        ("gemini", {"contents": [{"role": "user", "parts": [gemini_output]}]}),
        ("anthropic", {"messages": [{"role": "user", "content": [document]}]}),
    ]
    for wire, body in refused:
        sent = json.dumps(confine(wire, body))
        assert "x.example" not in sent and "file-account" not in sent, wire
        assert "not sent" in sent
    # What stands in for it translates like any text part, e.g. in a Gemini tool's answer.
    asked = {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}
    answered = {"contents": [asked, *refused[3][1]["contents"]]}
    messages = translation_between("gemini", "chat").request(answered, model="m")["messages"]
    assert "not sent" in messages[-1]["content"]
    with pytest.raises(Confined):  # a fetch no list holds: no part can stand in for it
        confine("responses", {"input": {"type": "item_reference", "id": "x"}})
    schema = {"type": "object", "properties": {"file_id": {"type": "string"}}}
    passes = {
        **output(inline),
        "tools": [{"type": "function", "name": "f", "parameters": schema}],
    }
    assert confine("responses", passes)["input"][1]["output"] == [inline]
    # What the agent called its own tools with is its data, not a fetch.
    called = {"type": "tool_use", "id": "t", "name": "fetch", "input": {"source": url_source}}
    confine("anthropic", {"messages": [{"role": "assistant", "content": [called]}]})
    args = {"functionCall": {"name": "get", "args": {"file_id": "f1", "image_url": "x"}}}
    confine("gemini", {"contents": [{"role": "model", "parts": [args]}]})


async def test_what_the_account_stored_is_out_of_reach(
    client: httpx.AsyncClient, tokens: TokenRegistry, upstream: tuple[FakeUpstream, str]
) -> None:
    o = bearer(tokens.issue("openai", "m", 60).token)
    before = len(upstream[0].requests)
    for method, path in [
        ("GET", "responses/resp_1"),
        ("GET", "responses/resp_1/input_items"),
        ("POST", "responses/resp_1/cancel"),
        ("GET", "responses"),
        ("GET", "chat/completions"),
    ]:
        r = await client.request(method, f"{OPENAI}/{path}", headers=o, json={})
        assert r.status_code == 404, (method, path)
    assert len(upstream[0].requests) == before


async def test_a_turn_waiting_for_the_user_makes_no_model_call(
    client: httpx.AsyncClient, tokens: TokenRegistry, upstream: tuple[FakeUpstream, str]
) -> None:
    grant = tokens.issue("openai", "m", 60)
    grant.model_paused = True  # engine/turns/questions.py: the agent asked the user and waits
    before = len(upstream[0].requests)
    body = {"model": "m", "input": "hi"}
    r = await client.post(f"{OPENAI}/responses", headers=bearer(grant.token), json=body)
    assert r.status_code == 502 and len(upstream[0].requests) == before
    grant.model_paused = False  # answered: the turn goes on
    r = await client.post(f"{OPENAI}/responses", headers=bearer(grant.token), json=body)
    assert r.status_code == 200


async def test_anthropic_key_swap_query_and_model(
    client: httpx.AsyncClient, tokens: TokenRegistry, upstream: tuple[FakeUpstream, str]
) -> None:
    grant = tokens.issue("anthropic", "claude-turn", 60)
    r = await client.post(
        f"{ANTHROPIC}/messages?beta=true",
        headers={"x-api-key": grant.token},
        json={"max_tokens": 5, "messages": []},
    )
    assert r.status_code == 200
    seen = upstream[0].requests[-1]
    assert seen["path"] == "v1/messages"
    assert seen["query"] == "beta=true"
    assert seen["headers"]["x-api-key"] == ANTHROPIC_KEY
    assert seen["headers"]["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen["headers"]
    assert seen["body"]["model"] == "claude-turn"  # set even though the caller named none


async def test_non_json_body_rejected(client: httpx.AsyncClient, tokens: TokenRegistry) -> None:
    grant = tokens.issue("openai", "m", 60)
    r = await client.post(f"{OPENAI}/responses", headers=bearer(grant.token), content=b"[1]")
    assert r.status_code == 400
    assert "error" in r.json()


async def test_oversized_body_rejected(
    client: httpx.AsyncClient, tokens: TokenRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proxy, "MAX_REQUEST_BYTES", 1000)
    grant = tokens.issue("openai", "m", 60)
    r = await client.post(
        f"{OPENAI}/responses", headers=bearer(grant.token), json={"input": "x" * 2000}
    )
    assert r.status_code == 413


# --- auth and paths ------------------------------------------------------------------------


async def test_bad_tokens_are_401_in_wire_shape(
    client: httpx.AsyncClient, tokens: TokenRegistry
) -> None:
    revoked = tokens.issue("openai", "m", 60)
    tokens.revoke(revoked.token)
    expired = tokens.issue("openai", "m", -1)
    anthropic = tokens.issue("anthropic", "m", 60)
    for token in ("uhpgw_unknown", revoked.token, expired.token, anthropic.token):
        r = await client.post(f"{OPENAI}/responses", headers=bearer(token), json={})
        assert r.status_code == 401
        assert r.json()["error"]["message"] == "Invalid or expired gateway token."
    r = await client.post(f"{OPENAI}/responses", json={})
    assert r.status_code == 401

    openai = tokens.issue("openai", "m", 60)
    r = await client.post(f"{ANTHROPIC}/messages", headers={"x-api-key": openai.token}, json={})
    assert r.status_code == 401
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "authentication_error"


async def test_disallowed_paths_are_404(client: httpx.AsyncClient, tokens: TokenRegistry) -> None:
    o = bearer(tokens.issue("openai", "m", 60).token)
    a = {"x-api-key": tokens.issue("anthropic", "m", 60).token}
    for url, headers in [
        (f"{OPENAI}/files", o),
        (f"{OPENAI}/fine_tuning/jobs", o),
        (f"{OPENAI}/models/..%2F..%2Ffiles", o),
        (f"{OPENAI}/responses/%2E%2E/files", o),
        (f"{ANTHROPIC}/messages/batches", a),
        (f"{ANTHROPIC}/complete", a),
    ]:
        r = await client.get(url, headers=headers)
        assert r.status_code == 404, url
    # Authentication comes first: no token, no hint about which paths exist.
    assert (await client.get(f"{OPENAI}/files")).status_code == 401


async def test_allowed_get_models(client: httpx.AsyncClient, tokens: TokenRegistry) -> None:
    r = await client.get(f"{OPENAI}/models", headers=bearer(tokens.issue("openai", "m", 60).token))
    assert r.status_code == 200
    assert [m["id"] for m in r.json()["data"]] == ["model-a", "model-b"]


# --- usage ---------------------------------------------------------------------------------


async def _post(client: httpx.AsyncClient, url: str, headers: dict, body: dict) -> httpx.Response:
    r = await client.post(url, headers=headers, json=body)
    assert r.status_code == 200, r.text
    return r


async def test_responses_usage_stream_and_json(
    client: httpx.AsyncClient, tokens: TokenRegistry
) -> None:
    grant = tokens.issue("openai", "m", 60)
    h = bearer(grant.token)
    r = await _post(client, f"{OPENAI}/responses", h, {"stream": True})
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["x-accel-buffering"] == "no"
    assert r.headers["cache-control"] == "no-cache"
    assert b"response.completed" in r.content
    assert grant.usage.as_uhp() == {
        "input_tokens": 100,
        "output_tokens": 20,
        "total_tokens": 120,
        "cache_read_tokens": 40,
        "input_tokens_details": {"cached_tokens": 40},
        "output_tokens_details": {"reasoning_tokens": 7},
    }
    await _post(client, f"{OPENAI}/responses", h, {"stream": False})
    assert grant.usage.as_uhp() == {
        "input_tokens": 200,
        "output_tokens": 40,
        "total_tokens": 240,
        "cache_read_tokens": 80,
        "input_tokens_details": {"cached_tokens": 80},
        "output_tokens_details": {"reasoning_tokens": 14},
    }


async def test_chat_usage_stream_and_json(client: httpx.AsyncClient, tokens: TokenRegistry) -> None:
    grant = tokens.issue("openai", "m", 60)
    h = bearer(grant.token)
    await _post(client, f"{OPENAI}/chat/completions", h, {"stream": True})
    assert grant.usage.as_uhp() == {
        "input_tokens": 50,
        "output_tokens": 5,
        "total_tokens": 55,
        "cache_read_tokens": 10,
        "input_tokens_details": {"cached_tokens": 10},
        "output_tokens_details": {"reasoning_tokens": 2},
    }
    await _post(client, f"{OPENAI}/chat/completions", h, {})
    assert grant.usage.as_uhp() == {
        "input_tokens": 100,
        "output_tokens": 10,
        "total_tokens": 110,
        "cache_read_tokens": 20,
        "input_tokens_details": {"cached_tokens": 20},
        "output_tokens_details": {"reasoning_tokens": 4},
    }


async def test_anthropic_usage_stream_and_json(
    client: httpx.AsyncClient, tokens: TokenRegistry
) -> None:
    grant = tokens.issue("anthropic", "m", 60)
    h = {"authorization": f"Bearer {grant.token}"}  # ANTHROPIC_AUTH_TOKEN style works too
    await _post(client, f"{ANTHROPIC}/messages", h, {"stream": True})
    # input counts cache reads and writes; output is message_delta's cumulative count.
    one = {
        "input_tokens": 240,
        "output_tokens": 15,
        "total_tokens": 255,
        "cache_read_tokens": 200,
        "cache_write_tokens": 30,
    }
    # Anthropic tells no thinking tokens apart from its output tokens.
    assert grant.usage.as_uhp() == {
        **one,
        "input_tokens_details": {"cached_tokens": 200},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    await _post(client, f"{ANTHROPIC}/messages", h, {})
    assert grant.usage.as_uhp() == {
        **{k: 2 * v for k, v in one.items()},
        "input_tokens_details": {"cached_tokens": 400},
        "output_tokens_details": {"reasoning_tokens": 0},
    }


async def test_no_usage_is_none(client: httpx.AsyncClient, tokens: TokenRegistry) -> None:
    grant = tokens.issue("openai", "m", 60)
    await _post(
        client,
        f"{OPENAI}/responses",
        bearer(grant.token),
        {"stream": True, "x_scenario": "no_usage"},
    )
    await _post(client, f"{OPENAI}/models", bearer(grant.token), {})  # JSON without usage
    assert grant.usage.seen is False
    assert grant.usage.as_uhp() is None
    assert UsageTotals().as_uhp() is None


# --- streaming ----------------------------------------------------------------------------


async def test_streaming_is_incremental(upstream: tuple[FakeUpstream, str]) -> None:
    fake, url = upstream
    tokens = TokenRegistry()
    grant = tokens.issue("openai", "m", 60)
    upstreams = Upstreams(make_settings(f"{url}/v1", url))
    with ServerThread(gateway_app(tokens, upstreams)) as gw:
        async with (
            httpx.AsyncClient(timeout=10) as c,
            c.stream(
                "POST",
                f"{gw.url}{OPENAI}/responses",
                headers=bearer(grant.token),
                json={"stream": True, "x_scenario": "slow"},
            ) as r,
        ):
            chunks = r.aiter_raw()
            first = await anext(chunks)
            first_at = time.monotonic()
            rest = b"".join([c async for c in chunks])
    assert first == b"data: first\n\n"
    assert rest == b"data: second\n\n"
    assert fake.second_sent_at > first_at  # the first chunk arrived before the second existed


# --- upstream failures -------------------------------------------------------------------


async def test_unreachable_upstream_is_502_without_host(tokens: TokenRegistry) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: connection refused
    upstreams = Upstreams(make_settings(f"http://localhost:{port}/v1", f"http://localhost:{port}"))
    transport = httpx.ASGITransport(app=gateway_app(tokens, upstreams))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
        r1 = await c.post(
            f"{OPENAI}/responses", headers=bearer(tokens.issue("openai", "m", 60).token), json={}
        )
        r2 = await c.post(
            f"{ANTHROPIC}/messages",
            headers={"x-api-key": tokens.issue("anthropic", "m", 60).token},
            json={},
        )
    await upstreams.aclose()
    assert r1.status_code == r2.status_code == 502
    assert r1.json()["error"]["type"] == "server_error"
    assert r2.json()["type"] == "error"
    # When to ask again, so that no CLI backs off for a minute (OpenCode did, on its own).
    assert r1.headers["retry-after-ms"] == r2.headers["retry-after-ms"] == "500"
    for r in (r1, r2):
        assert "localhost" not in r.text
        assert str(port) not in r.text


async def test_upstream_errors_never_echo_the_key(
    client: httpx.AsyncClient, tokens: TokenRegistry
) -> None:
    h = bearer(tokens.issue("openai", "m", 60).token)
    r = await client.post(f"{OPENAI}/responses", headers=h, json={"x_scenario": "echo_key"})
    assert r.status_code == 400
    assert OPENAI_KEY not in r.text
    assert "[redacted]" in r.text
    r = await client.post(f"{OPENAI}/responses", headers=h, json={"x_scenario": "upstream_401"})
    assert OPENAI_KEY not in r.text


async def test_the_key_never_passes_in_an_encoding_either(
    client: httpx.AsyncClient, tokens: TokenRegistry
) -> None:
    h = bearer(tokens.issue("openai", "m", 60).token)
    bodies = []
    for scenario, stream in (("echo_key_escaped", False), ("echo_key_stream", True)):
        body = {"x_scenario": scenario, "stream": stream}
        r = await client.post(f"{OPENAI}/responses", headers=h, json=body)
        bodies.append(r.content)
    escaped, streamed = bodies
    assert json.loads(escaped)["error"]["message"] == "bad key [redacted]"
    assert streamed == b'data: {}\n\ndata: {"type": "error", "message": "[redacted]"}\n\n'


async def test_relayed_response_headers_never_echo_the_key(
    client: httpx.AsyncClient, tokens: TokenRegistry
) -> None:
    h = bearer(tokens.issue("openai", "m", 60).token)
    for stream in (False, True):
        body = {"x_scenario": "echo_key_header", "stream": stream}
        r = await client.post(f"{OPENAI}/responses", headers=h, json=body)
        assert r.headers["x-request-id"] == "req-1 key=[redacted]"
        assert r.headers["x-ratelimit-note"] == "[redacted]"
        assert OPENAI_KEY not in str(r.headers)


async def test_a_refused_server_credential_is_answered_so_no_cli_retries_it(
    client: httpx.AsyncClient, tokens: TokenRegistry
) -> None:
    # Not a 401 (the agent's token is fine), not a 5xx (every CLI retries those, OpenCode
    # for over a minute), and no word that OpenCode retries by name ("server_error").
    h = bearer(tokens.issue("openai", "m", 60).token)
    r = await client.post(f"{OPENAI}/responses", headers=h, json={"x_scenario": "upstream_401"})
    assert r.status_code == 424
    assert r.headers["x-should-retry"] == "false"
    error = r.json()["error"]
    assert error["message"] == "The model provider refused the server's credential."
    assert "server_error" not in r.text


async def test_the_grant_keeps_the_provider_s_refusal_of_its_latest_model_call(
    client: httpx.AsyncClient, tokens: TokenRegistry
) -> None:
    # What makes a turn whose CLI cannot tell a provider's failure from its own (a generic
    # ACP agent) fail with `provider_error` (engine/turns/executor.py): the refusal's own
    # words, scrubbed; the server's credential refused, in the gateway's words; and nothing
    # once a later call went through.
    grant = tokens.issue("openai", "m", 60)
    h = bearer(grant.token)
    assert grant.provider_refusal is None
    await client.post(f"{OPENAI}/responses", headers=h, json={"x_scenario": "echo_key"})
    assert grant.provider_refusal == "bad thing with [redacted]"
    await client.post(f"{OPENAI}/responses", headers=h, json={"x_scenario": "upstream_401"})
    assert grant.provider_refusal == "The model provider refused the server's credential."
    ok = await client.post(f"{OPENAI}/responses", headers=h, json={"input": "hi"})
    assert ok.status_code == 200
    assert grant.provider_refusal is None


def test_a_refusal_naming_a_place_is_told_in_general_words() -> None:
    named = json.dumps({"error": {"message": "upstream http://10.0.0.7:8000/v1 is down"}})
    assert refusal_message(named.encode()) == PROVIDER_REFUSED
    assert refusal_message(b"<html>bad gateway</html>") == PROVIDER_REFUSED


async def test_unconfigured_backend_is_502(upstream: tuple[FakeUpstream, str]) -> None:
    tokens = TokenRegistry()
    settings = make_settings(upstream[1] + "/v1", upstream[1]).model_copy(
        update={"anthropic_api_key": None}
    )
    upstreams = Upstreams(settings)
    transport = httpx.ASGITransport(app=gateway_app(tokens, upstreams))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
        grant = tokens.issue("anthropic", "m", 60)
        r = await c.post(f"{ANTHROPIC}/messages", headers={"x-api-key": grant.token}, json={})
    await upstreams.aclose()
    assert r.status_code == 502


# --- tokens --------------------------------------------------------------------------------


def test_registry_issue_get_revoke_prune() -> None:
    now = [1000.0]
    reg = TokenRegistry(clock=lambda: now[0])
    g = reg.issue("openai", "m", 10)
    assert g.token.startswith("uhpgw_") and len(g.token) > 40
    assert reg.get(g.token) is g
    reg.revoke(g.token)
    assert g.revoked and reg.get(g.token) is None and len(reg) == 0
    reg.revoke(g.token)  # idempotent
    old = reg.issue("openai", "m", 10)
    now[0] += 11
    assert reg.get(old.token) is None
    reg.issue("openai", "m", 10)
    reg.issue("openai", "m", 10)
    assert len(reg) == 2  # expired grants do not pile up
    assert g.token not in repr(g)


# --- upstreams -----------------------------------------------------------------------------


def models_transport(calls: list[httpx.Request], fail: list[bool]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if fail[0]:
            return httpx.Response(503, json={"error": "down"})
        return httpx.Response(200, json={"data": [{"id": "first"}, {"id": "second"}]})

    return httpx.MockTransport(handler)


async def test_list_models_caches_and_recovers() -> None:
    calls: list[httpx.Request] = []
    fail = [False]
    now = [0.0]
    http = httpx.AsyncClient(transport=models_transport(calls, fail))
    ups = Upstreams(
        make_settings("https://oa.example/v1", "https://an.example", models_cache_seconds=60),
        http,
        clock=lambda: now[0],
    )
    assert await ups.list_models("openai") == ["first", "second"]
    assert await ups.list_models("openai") == ["first", "second"]
    assert len(calls) == 1
    assert str(calls[0].url) == "https://oa.example/v1/models"
    assert calls[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"

    assert await ups.list_models("anthropic") == ["first", "second"]
    assert calls[1].url.path == "/v1/models"
    assert calls[1].headers["x-api-key"] == ANTHROPIC_KEY
    assert calls[1].headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in calls[1].headers

    fail[0] = True
    now[0] += 61
    assert await ups.list_models("openai") is None
    fail[0] = False
    assert await ups.list_models("openai") is None  # a failure is cached, briefly
    now[0] += 6
    assert await ups.list_models("openai") == ["first", "second"]
    assert await ups.default_model("openai") == "first"
    await ups.aclose()
    assert not http.is_closed  # a client passed in belongs to the caller
    await http.aclose()


async def test_unreachable_and_unconfigured_models() -> None:
    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no route", request=request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(boom))
    settings = Settings(
        OPENAI_API_KEY=OPENAI_KEY,
        ANTHROPIC_API_KEY=None,
        openai_default_model="configured-model",
        anthropic_default_model=None,
    )
    ups = Upstreams(settings, http)
    assert await ups.list_models("openai") is None
    assert await ups.default_model("openai") == "configured-model"
    assert ups.get("anthropic") is None
    assert await ups.list_models("anthropic") is None
    assert await ups.default_model("anthropic") is None
    await http.aclose()


def test_base_url_normalisation() -> None:
    ups = Upstreams(make_settings("https://oa.example/v1/", "https://an.example/"))
    openai, anthropic = ups.get("openai"), ups.get("anthropic")
    assert openai is not None and anthropic is not None
    assert openai.url("responses") == "https://oa.example/v1/responses"
    assert anthropic.url("messages") == "https://an.example/v1/messages"
    ups2 = Upstreams(make_settings("https://oa.example/v1", "https://an.example/v1"))
    anthropic_v1 = ups2.get("anthropic")
    assert anthropic_v1 is not None
    assert anthropic_v1.url("messages") == "https://an.example/v1/messages"
    assert OPENAI_KEY not in repr(ups.get("openai"))


def test_gateway_paths() -> None:
    assert gateway_path("openai") == "/gateway/openai/v1"
    assert gateway_path("anthropic") == "/gateway/anthropic"
    with pytest.raises(ValueError):
        gateway_path("gemini")


async def test_a_token_bound_to_a_door_works_only_through_it(
    tokens: TokenRegistry, upstream: tuple[FakeUpstream, str]
) -> None:
    # The gateway app as a sandbox's socket serves it (tagged with its door), and as the
    # server's TCP port does (no tag).
    upstreams = Upstreams(make_settings(f"{upstream[1]}/v1/", upstream[1]))
    app = gateway_app(tokens, upstreams)
    grant = tokens.issue("openai", "gpt-turn-model", 60, door="local:turn-a")
    body = {"model": "x", "input": "hi"}
    statuses = {}
    for name, door in (("own", "local:turn-a"), ("other", "local:turn-b"), ("tcp", None)):
        served = app if door is None else gateway_only(app, door)
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
            r = await c.post(f"{OPENAI}/responses", headers=bearer(grant.token), json=body)
        statuses[name] = r.status_code
    await upstreams.aclose()
    assert statuses == {"own": 200, "other": 401, "tcp": 401}


async def test_a_suspended_grant_is_refused_until_resumed_with_the_next_turns_limits(
    client: httpx.AsyncClient, tokens: TokenRegistry, upstream: tuple[FakeUpstream, str]
) -> None:
    """A session's process kept warm holds its token between turns (engine/turns/warm.py):
    a model call while it idles is refused; the next turn's resume brings the token back
    with that turn's model and a usage count of its own."""
    grant = tokens.issue("openai", "gpt-first-turn", 60)
    grant.usage.add(input_tokens=7)
    assert tokens.suspend(grant.token, idle_seconds=30) is grant
    idle = await client.post(
        f"{OPENAI}/responses", headers=bearer(grant.token), json={"model": "x", "input": "hi"}
    )
    assert idle.status_code == 401
    assert tokens.get(grant.token) is None and len(tokens) == 1  # kept for the next turn
    resumed = tokens.resume(grant.token, "gpt-second-turn", 60)
    assert resumed is grant and not grant.usage.seen
    again = await client.post(
        f"{OPENAI}/responses", headers=bearer(grant.token), json={"model": "x", "input": "hi"}
    )
    assert again.status_code == 200
    assert upstream[0].requests[-1]["body"]["model"] == "gpt-second-turn"
    tokens.revoke(grant.token)
    assert tokens.resume(grant.token, "gpt-third", 60) is None  # a revoked one never returns
    assert tokens.suspend(grant.token, 30) is None


def test_a_suspended_grant_outlives_its_turns_lifetime_while_it_idles() -> None:
    now = [100.0]
    tokens = TokenRegistry(clock=lambda: now[0])
    grant = tokens.issue("openai", "m", 10)
    tokens.suspend(grant.token, idle_seconds=600)
    now[0] += 300  # past the turn's own lifetime, within the idle time
    tokens.issue("openai", "m", 10)  # prunes what expired
    assert tokens.resume(grant.token, "m", 10) is grant
    tokens.suspend(grant.token, idle_seconds=5)
    now[0] += 5 + 61
    assert tokens.resume(grant.token, "m", 10) is None  # lapsed: the turn starts cold
