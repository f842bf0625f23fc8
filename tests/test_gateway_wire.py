"""The gateway's wire translators, replaying real traffic: the requests Codex 0.169.0 and
Claude Code 2.1.328 sent (tests/support/capture_gateway.py) and the scripted provider's
streamed answers to them, native and Chat (tests/support/capture_answers.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.translations import translation_between
from tests.support.wire_summary import anthropic_summary, responses_summary
from uhp_server.gateway.wires import PAIRS, Translation, Untranslatable, translation
from uhp_server.gateway.wires.anthropic.translation import AnthropicOverChat
from uhp_server.gateway.wires.sse import SSEDecoder

FIXTURES = Path(__file__).parent / "fixtures" / "gateway"
SPLITS = (1, 2, 3, 7, 64, 10**9)  # byte boundaries the upstream stream is cut at
WIRE = {"codex": "responses", "claude": "anthropic"}


def captured(name: str) -> list[dict]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def run_stream(t: Translation, raw: bytes, size: int) -> list[dict]:
    """Feed `raw` in pieces of `size` bytes; the events the CLI would read."""
    stream = t.stream()
    out = b"".join(stream.feed(raw[i : i + size]) for i in range(0, len(raw), size))
    out += stream.finish()
    return events(out)


def events(raw: bytes) -> list[dict]:
    decoder = SSEDecoder()
    found = decoder.feed(raw) + decoder.flush()
    assert all(e.event == json.loads(e.data)["type"] for e in found)
    return [json.loads(e.data) for e in found]


def chat_sse(*chunks: dict, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None):
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-x", "model": "m", "created": 1, "choices": choices, "usage": usage}


CASES = [
    (f.name.split(".")[0], int(f.name.split(".")[1])) for f in sorted(FIXTURES.glob("*.chat.sse"))
]


@pytest.mark.parametrize(("name", "n"), CASES, ids=[f"{a}.{b}" for a, b in CASES])
def test_replayed_answers_match_what_the_native_api_said(name: str, n: int) -> None:
    cli = name.split("_")[0]
    t = translation_between(WIRE[cli], "chat")
    t.request(captured(name)[n], model="m")
    chat = (FIXTURES / f"{name}.{n}.chat.sse").read_bytes()
    native = events((FIXTURES / f"{name}.{n}.native.sse").read_bytes())
    summarize = responses_summary if cli == "codex" else anthropic_summary
    results = [summarize(run_stream(t, chat, size)) for size in SPLITS]
    assert all(r == results[0] for r in results)  # wherever the bytes were split
    got, want = results[0], summarize(native)
    assert got == want


def test_codex_tool_round_trip_request() -> None:
    second = captured("codex_tool")[1]
    t = translation_between("responses", "chat")
    chat = t.request(second, model="pinned")
    messages = chat["messages"]
    assert chat["model"] == "pinned" and chat["stream"] is True
    assert chat["stream_options"] == {"include_usage": True}
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant", "tool"]
    assert messages[0]["content"].startswith("You are a coding agent")
    call = messages[3]["tool_calls"][0]
    assert call["id"] == messages[4]["tool_call_id"] == "call_s0"
    assert json.loads(call["function"]["arguments"]) == {"cmd": "echo captured"}
    assert "captured" in messages[4]["content"]
    names = [f["function"]["name"] for f in chat["tools"]]
    assert "exec_command" in names
    assert any(n.startswith("multi_agent_v1__") for n in names)  # namespace flattened
    assert len(names) == len({n for n in names})
    assert chat["tool_choice"] == "auto" and chat["parallel_tool_calls"] is True
    for key in ("store", "include", "prompt_cache_key", "client_metadata", "reasoning", "input"):
        assert key not in chat


def test_namespaced_tool_call_comes_back_with_its_namespace() -> None:
    body = captured("codex_tool")[0]
    t = translation_between("responses", "chat")
    chat = t.request(body, model="m")
    flat = next(f["function"]["name"] for f in chat["tools"] if "__" in f["function"]["name"])
    namespace, name = flat.split("__", 1)
    call = {"index": 0, "id": "c1", "function": {"name": flat, "arguments": "{}"}}
    evs = run_stream(t, chat_sse(chunk({"tool_calls": [call]}), chunk({}, "tool_calls")), 5)
    item = evs[-1]["response"]["output"][0]
    assert (item["type"], item["name"], item["namespace"]) == ("function_call", name, namespace)
    # ...and goes to the provider flattened again when Codex sends it back.
    history = {"type": "function_call", "call_id": "c1", "name": name, "namespace": namespace}
    again = t.request(
        {**body, "input": [*body["input"], {**history, "arguments": "{}"}]}, model="m"
    )
    assert again["messages"][-1]["tool_calls"][0]["function"]["name"] == flat


def test_claude_tool_round_trip_request() -> None:
    body = captured("claude_tool")[1]
    chat = translation_between("anthropic", "chat").request(body, model="m")
    messages = chat["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    # The user message's text blocks stay separate parts (the prompt is the last one).
    blocks = [b["text"] for b in body["messages"][0]["content"]]
    assert [p["text"] for p in messages[1]["content"]] == blocks and len(blocks) > 1
    # Claude Code's mid-conversation system message joins the one leading system message.
    assert "Primary working directory" in messages[0]["content"]
    assert messages[0]["content"].count("You are a Claude agent") == 1
    assert messages[2]["tool_calls"][0]["id"] == messages[3]["tool_call_id"] == "toolu_s0"
    assert messages[3]["content"] == "captured"
    assert {"Bash", "Read", "Write"} <= {f["function"]["name"] for f in chat["tools"]}
    assert chat["max_tokens"] == 32000
    for key in ("thinking", "metadata", "context_management", "output_config", "system"):
        assert key not in chat


def test_parallel_tool_calls_each_become_an_item_with_their_own_fragments() -> None:
    def call(i: int, **f: str) -> dict:
        head = {"index": i, "id": f"call_{i}", "type": "function"} if "name" in f else {"index": i}
        return {**head, "function": f}

    raw = chat_sse(
        chunk({"role": "assistant", "content": "Running both."}),
        chunk({"tool_calls": [call(0, name="exec_command", arguments="")]}),
        chunk({"tool_calls": [call(0, arguments='{"cmd": ')]}),
        chunk({"tool_calls": [call(0, arguments='"ls"}')]}),
        chunk({"tool_calls": [call(1, name="exec_command", arguments='{"cmd"')]}),
        chunk({"tool_calls": [call(1, arguments=': "pwd"}')]}),
        chunk({}, "tool_calls"),
        chunk(usage={"prompt_tokens": 10, "completion_tokens": 4}),
    )
    t = translation_between("responses", "chat")
    evs = run_stream(t, raw, 3)
    calls = [i for i in evs[-1]["response"]["output"] if i["type"] == "function_call"]
    assert [(c["call_id"], json.loads(c["arguments"])) for c in calls] == [
        ("call_0", {"cmd": "ls"}),
        ("call_1", {"cmd": "pwd"}),
    ]
    fragments = [e for e in evs if e["type"] == "response.function_call_arguments.delta"]
    assert [f["output_index"] for f in fragments] == [1, 1, 2, 2]
    a = translation_between("anthropic", "chat")
    evs = run_stream(a, raw, 3)
    uses = [e["content_block"] for e in evs if e["type"] == "content_block_start"]
    assert [(b["type"], b.get("id")) for b in uses] == [
        ("text", None),
        ("tool_use", "call_0"),
        ("tool_use", "call_1"),
    ]
    assert evs[-2]["delta"]["stop_reason"] == "tool_use"


def test_deltas_are_forwarded_as_they_arrive() -> None:
    t = translation_between("responses", "chat")
    stream = t.stream()
    first = stream.feed(chat_sse(chunk({"content": "Hel"}), done=False))
    assert b'"delta":"Hel"' in first
    half = json.dumps(chunk({"content": "lo"})).encode()
    assert b"response.output_text.delta" not in stream.feed(b"data: " + half[:10])
    assert b'"delta":"lo"' in stream.feed(half[10:] + b"\n\n")
    a = translation_between("anthropic", "chat").stream()
    assert b'"text":"Hel"' in a.feed(chat_sse(chunk({"content": "Hel"}), done=False))


@pytest.mark.parametrize(
    ("finish", "status", "reason", "stop"),
    [
        ("stop", "completed", None, "end_turn"),
        ("length", "incomplete", "max_output_tokens", "max_tokens"),
        ("content_filter", "incomplete", "content_filter", "refusal"),
        ("tool_calls", "completed", None, "tool_use"),
    ],
)
def test_finish_reasons(finish: str, status: str, reason: str | None, stop: str) -> None:
    raw = chat_sse(chunk({"content": "x"}), chunk({}, finish))
    final = run_stream(translation_between("responses", "chat"), raw, 4)[-1]
    assert final["type"] == f"response.{status}"
    details = final["response"]["incomplete_details"]
    assert (details or {}).get("reason") == reason
    evs = run_stream(translation_between("anthropic", "chat"), raw, 4)
    assert evs[-2]["delta"]["stop_reason"] == stop and evs[-1]["type"] == "message_stop"


def test_usage_with_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": 60},
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    raw = chat_sse(chunk({"content": "x"}), chunk({}, "stop"), chunk(usage=usage))
    got = run_stream(translation_between("responses", "chat"), raw, 9)[-1]["response"]["usage"]
    assert got == {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 60},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 5},
        "total_tokens": 120,
    }
    evs = run_stream(translation_between("anthropic", "chat"), raw, 9)
    assert evs[-2]["usage"] == {
        "input_tokens": 40,
        "output_tokens": 20,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 60,
    }


def test_reasoning_field_names() -> None:
    for key in ("reasoning_content", "reasoning"):
        raw = chat_sse(chunk({key: "hmm"}), chunk({"content": "ok"}), chunk({}, "stop"))
        evs = run_stream(translation_between("responses", "chat"), raw, 2)
        assert [i["type"] for i in evs[-1]["response"]["output"]] == ["reasoning", "message"]
        assert evs[-1]["response"]["output"][0]["summary"][0]["text"] == "hmm"
        blocks = [
            e["content_block"]["type"]
            for e in run_stream(translation_between("anthropic", "chat"), raw, 2)
            if e["type"] == "content_block_start"
        ]
        assert blocks == ["thinking", "text"]


def test_provider_429_keeps_its_status_and_is_rewritten() -> None:
    error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
    upstream = json.dumps({"error": error}).encode()
    body = json.loads(translation_between("responses", "chat").error(429, upstream))
    assert body["error"]["message"] == "Rate limit reached"
    assert body["error"]["code"] == "rate_limit_exceeded"
    body = json.loads(translation_between("anthropic", "chat").error(429, upstream))
    assert body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Rate limit reached"},
    }


@pytest.mark.parametrize(
    ("upstream", "message"),
    [
        (b'{"error": "model is loading"}', "model is loading"),  # Ollama
        (b'{"object": "error", "message": "too long", "code": 400}', "too long"),  # vLLM
        (b'{"detail": "Not Found"}', "Not Found"),
        (b"Bad Gateway", "Bad Gateway"),
        (b"", "The model provider answered HTTP 502."),
    ],
)
def test_provider_error_shapes(upstream: bytes, message: str) -> None:
    body = json.loads(translation_between("responses", "chat").error(502, upstream))
    assert body["error"]["message"] == message and body["error"]["type"] == "server_error"
    body = json.loads(translation_between("anthropic", "chat").error(502, upstream))
    assert body["error"]["message"] == message and body["type"] == "error"


def test_error_in_the_stream_and_a_cut_stream_fail_visibly() -> None:
    mid = chat_sse(chunk({"content": "par"}), {"error": {"message": "upstream overloaded"}})
    final = run_stream(translation_between("responses", "chat"), mid, 5)[-1]
    assert final["type"] == "response.failed"
    assert final["response"]["error"]["message"] == "upstream overloaded"
    assert run_stream(translation_between("anthropic", "chat"), mid, 5)[-1] == {
        "type": "error",
        "error": {"type": "api_error", "message": "upstream overloaded"},
    }
    numeric = chat_sse({"error": {"message": "bad", "code": 400}})
    final = run_stream(translation_between("responses", "chat"), numeric, 5)[-1]["response"]
    assert final["error"] == {"code": "400", "message": "bad"}
    cut = chat_sse(chunk({"content": "par"}), done=False)
    assert (
        run_stream(translation_between("responses", "chat"), cut, 5)[-1]["type"]
        == "response.failed"
    )
    assert run_stream(translation_between("anthropic", "chat"), cut, 5)[-1]["type"] == "error"


def test_non_streamed_answers() -> None:
    completion = {
        "id": "chatcmpl-1",
        "model": "m",
        "created": 1,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Let me look.",
                    "reasoning_content": "need ls",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "Bash", "arguments": '{"command": "ls"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    t = translation_between("responses", "chat")
    t.request({"input": "hi", "tools": [{"type": "function", "name": "Bash"}]}, model="m")
    response = t.response(completion)
    assert response["status"] == "completed" and response["object"] == "response"
    assert [i["type"] for i in response["output"]] == ["reasoning", "message", "function_call"]
    message = translation_between("anthropic", "chat").response(completion)
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use"]
    assert message["content"][2]["input"] == {"command": "ls"}
    assert message["stop_reason"] == "tool_use" and message["usage"]["input_tokens"] == 7


def test_images_pass_through_as_data_urls() -> None:
    url = "data:image/png;base64,iVBORw0KGgo="
    chat = translation_between("responses", "chat").request(
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what is it"},
                        {"type": "input_image", "image_url": url},
                    ],
                }
            ]
        },
        model="m",
    )
    assert chat["messages"][0]["content"][1] == {"type": "image_url", "image_url": {"url": url}}
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    chat = translation_between("anthropic", "chat").request(
        {"messages": [{"role": "user", "content": [image]}], "max_tokens": 5}, model="m"
    )
    assert chat["messages"][0]["content"] == [{"type": "image_url", "image_url": {"url": url}}]


def test_image_in_a_tool_result_follows_the_tool_messages() -> None:
    url = "data:image/png;base64,AAAA"
    chat = translation_between("responses", "chat").request(
        {
            "input": [
                {"role": "user", "content": "look"},
                {"type": "function_call", "call_id": "a", "name": "view_image", "arguments": "{}"},
                {"type": "function_call", "call_id": "b", "name": "view_image", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "a",
                    "output": [{"type": "input_image", "image_url": url}],
                },
                {"type": "function_call_output", "call_id": "b", "output": "no image"},
            ]
        },
        model="m",
    )
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    assert chat["messages"][-1]["content"][1]["image_url"]["url"] == url


@pytest.mark.parametrize(
    ("wire", "body", "words"),
    [
        (
            "responses",
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_data": "x"}]}]},
            "input_file",
        ),
        (
            "responses",
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            "file_id",
        ),
        ("responses", {"input": [{"type": "item_reference", "id": "x"}]}, "item_reference"),
        ("responses", {"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ("responses", {"input": "x", "tools": [{"type": "local_shell"}]}, "local_shell"),
        (
            "anthropic",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "document",
                                "source": {
                                    "type": "base64",
                                    "media_type": "application/pdf",
                                    "data": "x",
                                },
                            }
                        ],
                    }
                ]
            },
            "document",
        ),
        (
            "anthropic",
            {
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            },
            "web_search_20250305",
        ),
    ],
)
def test_what_chat_cannot_carry_is_refused_by_name(wire: str, body: dict, words: str) -> None:
    with pytest.raises(Untranslatable) as raised:
        translation_between(wire, "chat").request(body, model="m")
    assert words in raised.value.message


def test_hosted_tools_are_not_offered_and_freeform_tools_round_trip() -> None:
    t = translation_between("responses", "chat")
    body = {
        "input": "patch it",
        "tools": [
            {"type": "web_search", "external_web_access": False},
            {
                "type": "custom",
                "name": "apply_patch",
                "description": "Patch files.",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"},
            },
        ],
    }
    chat = t.request(body, model="m")
    assert [f["function"]["name"] for f in chat["tools"]] == ["apply_patch"]
    args = json.dumps({"input": "*** Begin Patch\n*** End Patch"})
    call = {"index": 0, "id": "c9", "function": {"name": "apply_patch", "arguments": args}}
    evs = run_stream(t, chat_sse(chunk({"tool_calls": [call]}), chunk({}, "tool_calls")), 6)
    item = evs[-1]["response"]["output"][0]
    assert item["type"] == "custom_tool_call" and item["input"] == "*** Begin Patch\n*** End Patch"
    history = [{"type": "custom_tool_call", "call_id": "c9", "name": "apply_patch", "input": "P"}]
    again = t.request({**body, "input": history}, model="m")
    assert json.loads(again["messages"][0]["tool_calls"][0]["function"]["arguments"]) == {
        "input": "P"
    }


def test_count_tokens_is_an_estimate_from_the_request() -> None:
    body = captured("claude_tool")[1]
    estimate = AnthropicOverChat.count_tokens(body)["input_tokens"]
    assert estimate == len(json.dumps(body, ensure_ascii=False)) // 4 > 1000


def test_same_wire_passes_through() -> None:
    assert ("chat", "chat") in PAIRS and ("anthropic", "chat") in PAIRS
    assert ("chat", "anthropic") not in PAIRS
    assert translation("chat", "chat") is None
    assert translation("responses", "responses") is None
    with pytest.raises(ValueError):
        translation("bedrock", "chat")


def test_multibyte_text_split_inside_a_character() -> None:
    raw = chat_sse(chunk({"content": "héllo 世界 "}), chunk({"content": "🙂"}), chunk({}, "stop"))
    for wire, summarize in (("responses", responses_summary), ("anthropic", anthropic_summary)):
        assert (
            summarize(run_stream(translation_between(wire, "chat"), raw, 1))["text"]
            == "héllo 世界 🙂"
        )


def test_tool_name_arriving_after_its_arguments() -> None:
    late: list[dict[str, Any]] = [
        {"index": 0, "id": "c1", "function": {"arguments": '{"cmd": "ls"}'}},
        {"index": 0, "function": {"name": "exec_command"}},
    ]
    raw = chat_sse(*(chunk({"tool_calls": [c]}) for c in late), chunk({}, "tool_calls"))
    item = run_stream(translation_between("responses", "chat"), raw, 7)[-1]["response"]["output"][0]
    assert (item["name"], item["call_id"], item["arguments"]) == (
        "exec_command",
        "c1",
        late[0]["function"]["arguments"],
    )
    evs = run_stream(translation_between("anthropic", "chat"), raw, 7)
    assert anthropic_summary(evs)["args"] == {"cmd": "ls"}
    assert anthropic_summary(evs)["blocks"] == [("tool_use", "exec_command")]


def test_interleaved_tool_arguments_become_consecutive_anthropic_blocks() -> None:
    def call(i: int, arguments: str, name: str | None = None) -> dict:
        function = {"arguments": arguments, **({"name": name} if name else {})}
        return chunk({"tool_calls": [{"index": i, "id": f"c{i}", "function": function}]})

    raw = chat_sse(
        call(0, '{"a":', "f"),
        call(1, '{"b":', "g"),
        call(0, " 1}"),
        call(1, " 2}"),
        call(2, '{"c": 3}', "h"),
        chunk({}, "tool_calls"),
    )
    evs = run_stream(translation_between("anthropic", "chat"), raw, 11)
    assert evs[-1]["type"] == "message_stop"
    # One block at a time: each starts, streams and stops before the next starts.
    starts = [e["index"] for e in evs if e["type"] == "content_block_start"]
    stops = [e["index"] for e in evs if e["type"] == "content_block_stop"]
    assert starts == stops == [0, 1, 2]
    blocks = [e for e in evs if e["type"].startswith("content_block")]
    assert [b["index"] for b in blocks] == sorted(b["index"] for b in blocks)
    arguments: dict[int, str] = {}
    for e in evs:
        if e["type"] == "content_block_delta":
            arguments[e["index"]] = arguments.get(e["index"], "") + e["delta"]["partial_json"]
    assert [json.loads(arguments[i]) for i in range(3)] == [{"a": 1}, {"b": 2}, {"c": 3}]
    ids = [e["content_block"]["id"] for e in evs if e["type"] == "content_block_start"]
    assert ids == ["c0", "c1", "c2"]
    # Responses items carry their own output_index, so the same stream translates whole.
    calls = run_stream(translation_between("responses", "chat"), raw, 11)[-1]["response"]["output"]
    assert [json.loads(c["arguments"]) for c in calls] == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_a_non_streamed_request_asks_for_no_stream() -> None:
    for wire, body in (
        ("responses", {"input": "hi"}),
        ("anthropic", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9}),
    ):
        chat = translation_between(wire, "chat").request(body, model="m")
        assert "stream" not in chat and "stream_options" not in chat
        assert chat["messages"] == [{"role": "user", "content": "hi"}]


def test_earlier_reasoning_is_not_resent() -> None:
    chat = translation_between("anthropic", "chat").request(
        {
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": ""},
                        {"type": "text", "text": "a"},
                    ],
                },
                {"role": "user", "content": "q2"},
            ]
        },
        model="m",
    )
    assert chat["messages"][1] == {"role": "assistant", "content": "a"}
    chat = translation_between("responses", "chat").request(
        {
            "input": [
                {"type": "reasoning", "summary": [], "encrypted_content": "x"},
                {"role": "user", "content": "q"},
            ]
        },
        model="m",
    )
    assert chat["messages"] == [{"role": "user", "content": "q"}]


def test_crlf_framed_stream() -> None:
    raw = chat_sse(chunk({"content": "a"}), chunk({"content": "b"}), chunk({}, "stop"))
    crlf = raw.replace(b"\n", b"\r\n")
    for size in (1, 2, 5):
        evs = run_stream(translation_between("responses", "chat"), crlf, size)
        assert responses_summary(evs)["text"] == "ab" and evs[-1]["type"] == "response.completed"


def test_numeric_error_code_becomes_a_string() -> None:
    upstream = json.dumps(
        {"error": {"message": "too long", "type": "BadRequestError", "code": 400}}
    )
    body = json.loads(translation_between("responses", "chat").error(400, upstream.encode()))
    assert body["error"] == {
        "message": "too long",
        "type": "BadRequestError",
        "param": None,
        "code": "400",
    }
