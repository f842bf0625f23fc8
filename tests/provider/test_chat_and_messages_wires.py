"""The scripted provider over Chat Completions and Anthropic Messages."""

from __future__ import annotations

import json

import httpx
import openai
from openai.types.chat import ChatCompletionMessageParam

from tests.provider.wire_helpers import (
    BASH,
    CHAT_SHELL,
    KEY,
    anthropic_headers,
    function_of,
    sse_events,
)
from tests.scripted_provider import anthropic_messages
from tests.scripted_provider.script import plan

# --- OpenAI Chat Completions --------------------------------------------------------------


def test_chat_non_stream(oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(
        model="gpt-test-mini", messages=[{"role": "user", "content": "SAY hi"}]
    )
    assert completion.choices[0].message.content == "hi"
    assert completion.choices[0].finish_reason == "stop"
    usage = completion.usage
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_chat_stream_tool_call_then_answer(oai: openai.OpenAI) -> None:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "THINK hm\nRUN echo hi\nSAY got {output}"}],
        },
    ]
    chunks = list(
        oai.chat.completions.create(
            model="gpt-test",
            messages=messages,
            tools=[CHAT_SHELL],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join(d.model_dump().get("reasoning_content") or "" for d in deltas)
    assert reasoning == "hm"
    calls = [tc for d in deltas for tc in d.tool_calls or []]
    assert calls[0].id == "call_s0" and function_of(calls[0]).name == "shell"
    arguments = "".join(function_of(tc).arguments or "" for tc in calls)
    assert json.loads(arguments) == {"command": ["bash", "-lc", "echo hi"]}
    assert len(calls) > 2
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None and usage.total_tokens > 0

    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_s0",
                    "type": "function",
                    "function": {"name": "shell", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_s0", "content": "hi\n"},
    ]
    chunks = list(oai.chat.completions.create(model="gpt-test", messages=messages, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "got hi"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_chat_stream_ends_with_done(http: httpx.Client) -> None:
    body = {"model": "gpt-test", "stream": True, "messages": [{"role": "user", "content": "hey"}]}
    answer = http.post(
        "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}
    )
    events = sse_events(answer.text)
    assert events[-1] == (None, "[DONE]")
    assert "".join(d["choices"][0]["delta"].get("content", "") for _, d in events[:-1]) == "ok"


# --- Anthropic Messages ---------------------------------------------------------------------


def test_anthropic_stream_tool_use_then_text(http: httpx.Client) -> None:
    messages: list[dict] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                {"type": "text", "text": "THINK hmm\nRUN echo hi\nSAY got {output}"},
            ],
        },
    ]
    body = {"model": "claude-test", "max_tokens": 100, "stream": True, "tools": [BASH]}
    answer = http.post(
        "/v1/messages", json={**body, "messages": messages}, headers=anthropic_headers()
    )
    events = sse_events(answer.text)
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert events[0][1]["message"]["usage"]["input_tokens"] > 0
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    assert [d["type"] for d in deltas][:2] == ["thinking_delta", "signature_delta"]
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert starts[1] == {"type": "tool_use", "id": "toolu_s0", "name": "Bash", "input": {}}
    partial = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert json.loads(partial) == {"command": "echo hi"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"]["output_tokens"] > 0

    messages += [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {
                    "type": "tool_use",
                    "id": "toolu_s0",
                    "name": "Bash",
                    "input": {"command": "echo hi"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_s0",
                    "content": [{"type": "text", "text": "hi"}],
                }
            ],
        },
    ]
    answer = http.post(
        "/v1/messages", json={**body, "messages": messages}, headers=anthropic_headers()
    )
    events = sse_events(answer.text)
    text = "".join(d["delta"].get("text", "") for n, d in events if n == "content_block_delta")
    assert text == "got hi"
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_non_stream_and_fail(http: httpx.Client) -> None:
    body = {"model": "claude-test", "max_tokens": 100, "tools": [BASH]}
    messages = [{"role": "user", "content": 'TOOL Read {"file_path": "/x"}'}]
    answer = http.post(
        "/v1/messages", json={**body, "messages": messages}, headers=anthropic_headers()
    )
    message = answer.json()
    assert message["stop_reason"] == "tool_use"
    assert message["content"] == [
        {"type": "tool_use", "id": "toolu_s0", "name": "Read", "input": {"file_path": "/x"}}
    ]
    messages = [{"role": "user", "content": "FAIL 500 upstream broke"}]
    answer = http.post(
        "/v1/messages", json={**body, "messages": messages}, headers=anthropic_headers()
    )
    assert answer.status_code == 500
    assert answer.json() == {
        "type": "error",
        "error": {"type": "api_error", "message": "upstream broke"},
    }


def test_anthropic_deferred_tools_are_offered_by_the_name_the_cli_gives() -> None:
    # Claude Code 2.1 leaves MCP tools out of `tools` and names them in a system text.
    system = (
        "# Environment\nThe following deferred tools are now available via ToolSearch. Their "
        'schemas are NOT loaded. Use ToolSearch with query "select:<name>" first:\nWebFetch\n'
        "mcp__conformance-http__uhp_echo\n\nAvailable agent types: ..."
    )
    body = {
        "tools": [{"name": "Bash", "input_schema": BASH["input_schema"]}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "TOOL uhp_echo {}"}]},
            {"role": "system", "content": [{"type": "text", "text": system}]},
        ],
    }
    _, tools = anthropic_messages.parse(body)
    assert [t.name for t in tools] == ["Bash", "WebFetch", "mcp__conformance-http__uhp_echo"]
    (call,) = plan(*anthropic_messages.parse(body)).tool_calls
    assert call.name == "mcp__conformance-http__uhp_echo"
