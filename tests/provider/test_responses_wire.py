"""The scripted provider over the OpenAI Responses wire."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import (
    NamespaceToolParam,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseInputItemParam,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ToolParam,
)

from tests.provider.wire_helpers import CODEX_OUTPUT, EXEC_COMMAND, KEY, sse_events, user
from tests.scripted_provider import RunningProvider

# --- OpenAI Responses ----------------------------------------------------------------------


def test_responses_stream_text_deltas(oai: openai.OpenAI) -> None:
    stream = oai.responses.create(model="gpt-test", input=[user("SAY hello world")], stream=True)
    events = list(stream)
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert deltas == ["hell", "o wo", "rld"]
    assert types.index("response.content_part.added") < types.index("response.output_text.done")
    assert isinstance(events[-1], ResponseCompletedEvent)
    final = events[-1].response
    assert final.output_text == "hello world"
    assert final.usage is not None
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
    assert final.usage.total_tokens == final.usage.input_tokens + final.usage.output_tokens


def test_responses_raw_sse_has_event_lines(http: httpx.Client) -> None:
    body = {"model": "gpt-test", "input": "THINK why\nSAY ok", "stream": True}
    answer = http.post("/v1/responses", json=body, headers={"authorization": f"Bearer {KEY}"})
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = sse_events(answer.text)
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[2:9] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
    ]


def test_responses_think_non_stream(oai: openai.OpenAI) -> None:
    response = oai.responses.create(model="gpt-test", input="THINK let me see\nSAY fine")
    reasoning, message = response.output
    assert isinstance(reasoning, ResponseReasoningItem) and reasoning.type == "reasoning"
    assert reasoning.summary[0].text == "let me see"
    assert isinstance(message, ResponseOutputMessage)
    assert isinstance(message.content[0], ResponseOutputText)
    assert message.content[0].text == "fine"
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens > 0


def test_responses_run_steps(oai: openai.OpenAI, provider: RunningProvider) -> None:
    history: list[ResponseInputItemParam] = [user("<environment_context>x</environment_context>")]
    history.append(user("RUN echo hi\nRUN echo two\nSAY got {output}"))
    stream = oai.responses.create(
        model="gpt-test", input=history, tools=[EXEC_COMMAND], stream=True
    )
    events = list(stream)
    arg_deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert isinstance(events[-1], ResponseCompletedEvent)
    call = events[-1].response.output[0]
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.type, call.name, call.call_id) == ("function_call", "exec_command", "call_s0")
    assert json.loads(call.arguments) == {"cmd": "echo hi"}
    assert "".join(arg_deltas) == call.arguments and len(arg_deltas) > 1

    history += [
        {"type": "function_call", "call_id": "call_s0", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_s0", "output": "one"},
    ]
    second = oai.responses.create(model="gpt-test", input=history, tools=[EXEC_COMMAND])
    assert isinstance(second.output[0], ResponseFunctionToolCall)
    assert json.loads(second.output[0].arguments) == {"cmd": "echo two"}
    assert second.output[0].call_id == "call_s1"

    history += [
        {"type": "function_call", "call_id": "call_s1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_s1", "output": CODEX_OUTPUT},
    ]
    third = oai.responses.create(model="gpt-test", input=history, tools=[EXEC_COMMAND])
    assert third.output_text == "got hi"
    assert [r["step"] for r in provider.requests()] == [0, 1, 2]
    assert provider.requests()[0]["script"] == ["RUN echo hi", "RUN echo two", "SAY got {output}"]


def test_responses_tool_interleaves_and_namespaces(oai: openai.OpenAI) -> None:
    namespace: NamespaceToolParam = {
        "type": "namespace",
        "name": "mcp__demo",
        "description": "the demo MCP server's tools",  # (as Codex sends: the SDK requires it)
        "tools": [{"type": "function", "name": "echo_back", "parameters": {"type": "object"}}],
    }
    tools: list[ToolParam] = [EXEC_COMMAND, namespace]
    history: list[ResponseInputItemParam] = [
        user('RUN ls\nTOOL mcp__demo__echo_back {"text": "zz"}\nSAY {output}')
    ]
    first = oai.responses.create(model="gpt-test", input=history, tools=tools)
    assert isinstance(first.output[0], ResponseFunctionToolCall)
    assert first.output[0].name == "exec_command"
    history.append({"type": "function_call_output", "call_id": "call_s0", "output": "a"})
    second = oai.responses.create(model="gpt-test", input=history, tools=tools)
    call = second.output[0].model_dump()
    assert (call["name"], call["namespace"]) == ("echo_back", "mcp__demo")
    assert json.loads(call["arguments"]) == {"text": "zz"}
    history.append({"type": "function_call_output", "call_id": "call_s1", "output": "echoed"})
    assert (
        oai.responses.create(model="gpt-test", input=history, tools=tools).output_text == "echoed"
    )


def test_responses_custom_tool(http: httpx.Client) -> None:
    tools = [{"type": "custom", "name": "apply_patch", "description": "patch"}]
    body: dict[str, Any] = {"model": "gpt-test", "stream": True, "tools": tools}
    body["input"] = [user('TOOL apply_patch "*** Begin Patch"')]
    answer = http.post("/v1/responses", json=body, headers={"x-api-key": KEY})
    events = sse_events(answer.text)
    deltas = [d["delta"] for n, d in events if n == "response.custom_tool_call_input.delta"]
    assert "".join(deltas) == "*** Begin Patch"
    item = events[-1][1]["response"]["output"][0]
    assert (item["type"], item["name"], item["input"]) == (
        "custom_tool_call",
        "apply_patch",
        "*** Begin Patch",
    )
    body["input"].append({"type": "custom_tool_call_output", "call_id": "call_s0", "output": "x"})
    answer = http.post("/v1/responses", json={**body, "stream": False}, headers={"x-api-key": KEY})
    assert answer.json()["output"][0]["content"][0]["text"] == "done"


def test_responses_loop(oai: openai.OpenAI) -> None:
    history: list[ResponseInputItemParam] = [user("LOOP")]
    for n in range(1, 4):
        response = oai.responses.create(model="gpt-test", input=history, tools=[EXEC_COMMAND])
        assert isinstance(response.output[0], ResponseFunctionToolCall)
        assert json.loads(response.output[0].arguments) == {"cmd": f"echo step {n}"}
        history.append({"type": "function_call_output", "call_id": "x", "output": "y"})


def test_recall(oai: openai.OpenAI) -> None:
    first = oai.responses.create(model="gpt-test", input=[user("REMEMBER apple")])
    assert first.output_text == "noted apple"
    history: list[ResponseInputItemParam] = [
        user("REMEMBER apple"),
        {"type": "message", "role": "assistant", "content": "noted apple"},
        user("RECALL"),
    ]
    assert oai.responses.create(model="gpt-test", input=history).output_text == "you said apple"
    assert oai.responses.create(model="gpt-test", input="RECALL").output_text == "nothing to recall"


def test_fail_openai(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.create(model="gpt-test", input="FAIL 400 scripted boom", stream=True)
    assert caught.value.status_code == 400
    body = caught.value.body  # (the error's JSON, typed `object`)
    assert isinstance(body, dict) and body["message"] == "scripted boom"


def test_usage_is_deterministic(http: httpx.Client) -> None:
    body = {"model": "gpt-test", "input": "THINK a\nSAY deterministic"}
    headers = {"authorization": f"Bearer {KEY}"}
    raw = json.dumps(body).encode()
    first = http.post("/v1/responses", content=raw, headers=headers).json()
    second = http.post("/v1/responses", content=raw, headers=headers).json()
    assert first == second
    assert first["usage"]["input_tokens"] == len(raw) // 4
    assert first["usage"]["output_tokens"] == len("a" + "deterministic") // 4


def test_slow_and_sleep(oai: openai.OpenAI) -> None:
    text = "the quick brown fox jumps over the lazy dog"
    started = time.monotonic()
    stream = oai.responses.create(model="gpt-test", input=f"SLOW 0.5\nSAY {text}", stream=True)
    deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
    assert time.monotonic() - started >= 0.45
    assert len(deltas) >= 20 and "".join(deltas) == text
    started = time.monotonic()
    assert oai.responses.create(model="gpt-test", input="SLEEP 0.3\nSAY x").output_text == "x"
    assert time.monotonic() - started >= 0.3
