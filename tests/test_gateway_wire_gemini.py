"""The Gemini wire (Gemini CLI's `generateContent`) over a Chat Completions provider: the
requests Gemini CLI 0.61.0 really sent (tests/fixtures/gateway/gemini_tool.json, a shell
tool round trip), and streamed Chat answers cut at every byte boundary."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.support.translations import translation_between
from uhp_server.gateway.wires import PAIRS, Untranslatable
from uhp_server.gateway.wires.gemini.translation import GeminiOverChat
from uhp_server.gateway.wires.sse import SSEDecoder

FIXTURES = Path(__file__).parent / "fixtures" / "gateway"
SPLITS = (1, 2, 3, 7, 64, 10**9)


def captured() -> list[dict]:
    return json.loads((FIXTURES / "gemini_tool.json").read_text())


def chat_sse(*chunks: dict, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None):
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-x", "model": "m", "created": 1, "choices": choices, "usage": usage}


def run_stream(raw: bytes, size: int) -> list[dict]:
    stream = translation_between("gemini", "chat").stream()
    out = b"".join(stream.feed(raw[i : i + size]) for i in range(0, len(raw), size))
    out += stream.finish()
    decoder = SSEDecoder()
    found = decoder.feed(out) + decoder.flush()
    assert all(e.event is None for e in found)  # alt=sse sends data lines only
    return [json.loads(e.data) for e in found]


def parts(responses: list[dict]) -> list[dict]:
    return [p for r in responses for p in r["candidates"][0]["content"]["parts"]]


def test_gemini_over_chat_is_served() -> None:
    assert ("gemini", "chat") in PAIRS and ("gemini", "anthropic") not in PAIRS


def test_captured_first_request() -> None:
    call = captured()[0]
    assert call["path"] == "v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    chat = translation_between("gemini", "chat").request(
        {**call["body"], "stream": True}, model="p"
    )
    assert chat["model"] == "p" and chat["stream"] is True
    assert chat["stream_options"] == {"include_usage": True}
    messages = chat["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("You are a non-interactive CLI agent")
    # The session context and the prompt stay two text parts.
    assert [p["type"] for p in messages[1]["content"]] == ["text", "text"]
    assert messages[1]["content"][1]["text"] == "say hi using shell"
    names = [t["function"]["name"] for t in chat["tools"]]
    assert "run_shell_command" in names and len(names) == len(set(names))
    shell = next(
        t["function"] for t in chat["tools"] if t["function"]["name"] == "run_shell_command"
    )
    assert (
        shell["parameters"]["type"] == "object" and "command" in shell["parameters"]["properties"]
    )
    # generationConfig: temperature 1, topP 0.95, topK 64 (dropped), thinkingBudget 8192.
    assert (chat["temperature"], chat["top_p"], chat["reasoning_effort"]) == (1, 0.95, "medium")
    for key in ("contents", "systemInstruction", "generationConfig", "top_k", "topK"):
        assert key not in chat


def test_captured_tool_round_trip_request() -> None:
    body = captured()[1]["body"]
    chat = translation_between("gemini", "chat").request(body, model="m")
    messages = chat["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assistant, tool = messages[2], messages[3]
    assert assistant["content"] == "Let me look."
    call = assistant["tool_calls"][0]
    assert call["id"] == tool["tool_call_id"] == "run_shell_command_1796057334184_0"
    assert call["function"]["name"] == "run_shell_command"
    assert json.loads(call["function"]["arguments"]) == {
        "command": "echo hi",
        "description": "say hi",
    }
    # The tool's {"output": ...} is the text the model reads, not a JSON wrapper.
    assert tool["content"].startswith("<untrusted_context>\nOutput: hi")
    assert "stream" not in chat  # `:generateContent` without the gateway's stream flag


def test_calls_without_ids_are_paired_by_name_in_order() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "ls", "args": {"p": "a"}}},
                    {"functionCall": {"name": "ls", "args": {"p": "b"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "ls", "response": {"output": "A"}}},
                    {"functionResponse": {"name": "ls", "response": {"error": "no b"}}},
                ],
            },
        ]
    }
    messages = translation_between("gemini", "chat").request(body, model="m")["messages"]
    ids = [c["id"] for c in messages[1]["tool_calls"]]
    assert ids == ["call_1", "call_2"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[2:]] == [
        ("call_1", "A"),
        ("call_2", "[tool error] no b"),
    ]


def test_images_schema_types_tool_config_and_generation() -> None:
    png = base64.b64encode(b"\x89PNG").decode()
    note = base64.b64encode("héllo".encode()).decode()
    body = {
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "look"},
                    {"inlineData": {"mimeType": "image/png", "data": png}},
                    {"inlineData": {"mimeType": "text/plain", "data": note}},
                ],
            }
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "f",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {"n": {"type": "INTEGER", "nullable": True}},
                        },
                    }
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}},
        "generationConfig": {
            "maxOutputTokens": 99,
            "stopSequences": ["END"],
            "seed": 7,
            "responseMimeType": "application/json",
            "thinkingConfig": {"thinkingBudget": 0},
        },
    }
    chat = translation_between("gemini", "chat").request(body, model="m")
    assert chat["messages"][0] == {"role": "system", "content": "be brief"}
    content = chat["messages"][1]["content"]
    assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
    assert content[2] == {"type": "text", "text": "héllo"}
    parameters = chat["tools"][0]["function"]["parameters"]
    assert parameters == {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert (chat["max_tokens"], chat["stop"], chat["seed"]) == (99, ["END"], 7)
    assert chat["response_format"] == {"type": "json_object"}
    assert "reasoning_effort" not in chat  # budget 0: the provider's own default


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {
                "contents": [{"role": "user", "parts": [{"text": "x"}]}],
                "tools": [{"googleSearch": {}}],
            },
            "googleSearch",
        ),
        (
            {"contents": [{"role": "user", "parts": [{"executableCode": {"code": "1"}}]}]},
            "executableCode",
        ),
        (
            {
                "contents": [
                    {
                        "role": "user",
                        "parts": [{"inlineData": {"mimeType": "application/pdf", "data": "AA=="}}],
                    }
                ]
            },
            "application/pdf",
        ),
        (
            {
                "contents": [
                    {
                        "role": "user",
                        "parts": [{"functionResponse": {"name": "ghost", "response": {}}}],
                    }
                ]
            },
            "ghost",
        ),
        ({"contents": []}, "no messages"),
    ],
)
def test_what_chat_cannot_carry_is_refused_by_name(body: dict, words: str) -> None:
    with pytest.raises(Untranslatable) as refused:
        translation_between("gemini", "chat").request(body, model="m")
    assert words in refused.value.message


def test_stream_text_thoughts_and_a_tool_call() -> None:
    usage = {
        "prompt_tokens": 11,
        "completion_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    raw = chat_sse(
        chunk({"role": "assistant", "reasoning_content": "thinking"}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk(
            {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "ls", "arguments": ""}}]}
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"dir": '}}]}),
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "c2", "function": {"name": "pwd", "arguments": "{}"}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"src"}'}}]}),
        chunk({}, "tool_calls"),
        chunk(None, usage=usage),
    )
    results = [run_stream(raw, size) for size in SPLITS]
    assert all(r == results[0] for r in results)  # wherever the bytes were split
    responses = results[0]
    # One response per delta as it arrives; the calls whole, in the last one.
    assert parts(responses) == [
        {"text": "thinking", "thought": True},
        {"text": "Hel"},
        {"text": "lo"},
        {"functionCall": {"name": "ls", "args": {"dir": "src"}, "id": "c1"}},
        {"functionCall": {"name": "pwd", "args": {}, "id": "c2"}},
    ]
    last = responses[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert all("finishReason" not in r["candidates"][0] for r in responses[:-1])
    assert last["usageMetadata"] == {
        "promptTokenCount": 11,
        "candidatesTokenCount": 6,
        "totalTokenCount": 20,
        "thoughtsTokenCount": 3,
        "cachedContentTokenCount": 4,
    }
    assert {r["responseId"] for r in responses} == {"chatcmpl-x"}


def test_text_goes_out_before_the_stream_ends() -> None:
    stream = translation_between("gemini", "chat").stream()
    out = stream.feed(chat_sse(chunk({"content": "early"}), done=False))
    assert b'"text":"early"' in out


@pytest.mark.parametrize(
    ("finish", "reason"),
    [("stop", "STOP"), ("length", "MAX_TOKENS"), ("content_filter", "SAFETY"), ("odd", "OTHER")],
)
def test_finish_reasons(finish: str, reason: str) -> None:
    responses = run_stream(chat_sse(chunk({"content": "x"}), chunk({}, finish)), 10**9)
    assert responses[-1]["candidates"][0]["finishReason"] == reason


def test_error_in_the_stream_and_a_cut_stream_fail_visibly() -> None:
    failed = run_stream(chat_sse(chunk({"content": "a"}), {"error": {"message": "boom"}}), 5)
    assert failed[-1] == {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}
    cut = run_stream(chat_sse(chunk({"content": "a"}), done=False), 5)
    assert cut[-1]["error"]["message"].startswith("The model provider's stream ended")
    assert all("finishReason" not in r.get("candidates", [{}])[0] for r in cut)


def test_non_streamed_answer() -> None:
    completion = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "reasoning": "hmm",
                    "content": "Done.",
                    "tool_calls": [
                        {
                            "id": "c9",
                            "type": "function",
                            "function": {"name": "ls", "arguments": '{"a": 1}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    answer = translation_between("gemini", "chat").response(completion)
    candidate = answer["candidates"][0]
    assert candidate["content"] == {
        "role": "model",
        "parts": [
            {"text": "hmm", "thought": True},
            {"text": "Done."},
            {"functionCall": {"name": "ls", "args": {"a": 1}, "id": "c9"}},
        ],
    }
    assert candidate["finishReason"] == "STOP"
    assert answer["usageMetadata"]["totalTokenCount"] == 5


def test_provider_errors_keep_their_status_in_gemini_shape() -> None:
    t = translation_between("gemini", "chat")
    body = json.loads(t.error(429, b'{"error": {"message": "slow down", "type": "x"}}'))
    assert body == {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
    assert json.loads(t.error(503, b"overloaded"))["error"]["status"] == "UNAVAILABLE"
    assert json.loads(t.refusal(400, "no"))["error"] == {
        "code": 400,
        "message": "no",
        "status": "INVALID_ARGUMENT",
    }


def test_count_tokens_is_an_estimate_from_the_request() -> None:
    t = translation_between("gemini", "chat")
    assert isinstance(t, GeminiOverChat)  # (its own estimate: Chat has no count_tokens)
    small = t.count_tokens({"contents": [{"parts": [{"text": "hi"}]}]})["totalTokens"]
    big = t.count_tokens({"contents": [{"parts": [{"text": "hi " * 400}]}]})["totalTokens"]
    assert 0 < small < big
