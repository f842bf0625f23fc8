"""Tests of the scripted model provider, over each wire, plus one real Codex CLI run."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.scripted_provider import RunningProvider, start_provider
from tests.scripted_provider.script import (
    Event,
    ToolSpec,
    parse_directives,
    plan,
    shell_arguments,
    tool_output_text,
)

KEY = "sk-scripted-test"
MODELS = ["gpt-test", "gpt-test-mini", "claude-test"]
EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}},
        "required": ["cmd"],
    },
}
CHAT_SHELL = {
    "type": "function",
    "function": {
        "name": "shell",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "array", "items": {"type": "string"}}},
            "required": ["command"],
        },
    },
}
BASH = {
    "name": "Bash",
    "description": "run a command",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
        "required": ["command"],
    },
}
CODEX_OUTPUT = "Chunk ID: 1\nWall time: 0.01 seconds\nProcess exited with code 0\nOutput:\nhi\n"


@pytest.fixture(scope="module")
def running() -> Iterator[RunningProvider]:
    provider = start_provider(KEY, MODELS)
    yield provider
    provider.stop()


@pytest.fixture
def provider(running: RunningProvider) -> RunningProvider:
    running.reset()
    return running


@pytest.fixture
def oai(provider: RunningProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=provider.base_url, api_key=KEY, max_retries=0)


@pytest.fixture
def http(provider: RunningProvider) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=provider.url, timeout=30) as client:
        yield client


def anthropic_headers(key: str = KEY) -> dict[str, str]:
    return {"x-api-key": key, "anthropic-version": "2023-06-01"}


def sse_events(text: str) -> list[tuple[str | None, object]]:
    """Parse an SSE body into (event name, parsed data) pairs."""
    events = []
    for block in text.strip().split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                raw = line[len("data: ") :]
                data = raw if raw == "[DONE]" else json.loads(raw)
        events.append((name, data))
    return events


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


# --- the script language, wire-neutral ------------------------------------------------


def test_directives_found_after_whitespace_only_at_line_start() -> None:
    text = "<context>\nsome SAY text\n</context>\n   SAY hi there\nRUN  ls -l\nLOOP\nSAYS no"
    assert parse_directives(text) == [("SAY", "hi there"), ("RUN", "ls -l"), ("LOOP", "")]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (CODEX_OUTPUT, "hi"),
        ("Exit code: 0\nWall time: 0.1 seconds\nOutput:\nhello\nworld\n", "hello\nworld"),
        (json.dumps({"output": "from json\n", "metadata": {"exit_code": 0}}), "from json"),
        ("  plain  \n", "plain"),
        (
            "Command: printf 'a\\nb'\nDirectory: (root)\nOutput: a\nb\nError: (none)\n"
            "Exit Code: 0\nSignal: (none)\nProcess Group PGID: 14471",
            "a\nb",
        ),
    ],
)
def test_tool_output_extraction(raw: str, expected: str) -> None:
    assert tool_output_text(raw) == expected


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"properties": {"cmd": {"type": "string"}}}, {"cmd": "ls"}),
        ({"properties": {"command": {"type": "array"}}}, {"command": ["bash", "-lc", "ls"]}),
        ({"properties": {"command": {"type": "string"}}}, {"command": "ls"}),
        (
            {
                "properties": {"command": {"type": "string"}, "workdir": {}, "timeout": {}},
                "required": ["command", "workdir"],
            },
            {"command": "ls", "workdir": "/w"},
        ),
    ],
)
def test_shell_arguments_follow_schema(schema: dict, expected: dict) -> None:
    assert shell_arguments(ToolSpec("shell", schema), "ls", cwd="/w") == expected


def test_plan_defaults() -> None:
    assert plan([Event("user", "hello")], []).text == "ok"
    assert plan([Event("user", "THINK hmm")], []).text == "done"
    assert plan([Event("user", "RUN ls")], []).text == "no shell tool"
    finished = [Event("user", "SAY one"), Event("assistant_text", "one"), Event("user", "hi")]
    assert plan(finished, []).text == "ok"


def test_plan_prefers_shell_tools_in_order() -> None:
    tools = [ToolSpec("bash", {}), ToolSpec("Bash", {}), ToolSpec("shell_command", {})]
    call = plan([Event("user", "RUN ls")], tools).tool_call
    assert call is not None
    assert call.name == "shell_command"


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
    final = events[-1].response
    assert final.output_text == "hello world"
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
    assert reasoning.type == "reasoning"
    assert reasoning.summary[0].text == "let me see"
    assert message.content[0].text == "fine"
    assert response.usage.output_tokens_details.reasoning_tokens > 0


def test_responses_run_steps(oai: openai.OpenAI, provider: RunningProvider) -> None:
    history = [user("<environment_context>x</environment_context>")]
    history.append(user("RUN echo hi\nRUN echo two\nSAY got {output}"))
    stream = oai.responses.create(
        model="gpt-test", input=history, tools=[EXEC_COMMAND], stream=True
    )
    events = list(stream)
    arg_deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    call = events[-1].response.output[0]
    assert (call.type, call.name, call.call_id) == ("function_call", "exec_command", "call_s0")
    assert json.loads(call.arguments) == {"cmd": "echo hi"}
    assert "".join(arg_deltas) == call.arguments and len(arg_deltas) > 1

    history += [
        {"type": "function_call", "call_id": "call_s0", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_s0", "output": "one"},
    ]
    second = oai.responses.create(model="gpt-test", input=history, tools=[EXEC_COMMAND])
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
    namespace = {
        "type": "namespace",
        "name": "mcp__demo",
        "tools": [{"type": "function", "name": "echo_back", "parameters": {"type": "object"}}],
    }
    tools = [EXEC_COMMAND, namespace]
    history = [user('RUN ls\nTOOL mcp__demo__echo_back {"text": "zz"}\nSAY {output}')]
    first = oai.responses.create(model="gpt-test", input=history, tools=tools)
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
    body = {"model": "gpt-test", "stream": True, "tools": tools}
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
    history: list[dict] = [user("LOOP")]
    for n in range(1, 4):
        response = oai.responses.create(model="gpt-test", input=history, tools=[EXEC_COMMAND])
        assert json.loads(response.output[0].arguments) == {"cmd": f"echo step {n}"}
        history.append({"type": "function_call_output", "call_id": "x", "output": "y"})


def test_recall(oai: openai.OpenAI) -> None:
    first = oai.responses.create(model="gpt-test", input=[user("REMEMBER apple")])
    assert first.output_text == "noted apple"
    history = [
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
    assert caught.value.body["message"] == "scripted boom"


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


# --- OpenAI Chat Completions --------------------------------------------------------------


def test_chat_non_stream(oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(
        model="gpt-test-mini", messages=[{"role": "user", "content": "SAY hi"}]
    )
    assert completion.choices[0].message.content == "hi"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0


def test_chat_stream_tool_call_then_answer(oai: openai.OpenAI) -> None:
    messages: list[dict] = [
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
    assert calls[0].id == "call_s0" and calls[0].function.name == "shell"
    arguments = "".join(tc.function.arguments or "" for tc in calls)
    assert json.loads(arguments) == {"command": ["bash", "-lc", "echo hi"]}
    assert len(calls) > 2
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0

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
    root = Path(__file__).resolve().parent.parent
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


# --- the real Codex CLI ---------------------------------------------------------------------


@pytest.mark.slow
def test_codex_cli_runs_a_command(
    provider: RunningProvider, codex_installed: Path, tmp_path: Path
) -> None:
    """The CLI is found where the server finds it (the tools dir), installed when missing."""
    import tomli_w

    from harness_bases.codex.install import binary_path

    home, workdir = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    scripted = {
        "name": "scripted",
        "base_url": provider.base_url,
        "env_key": "SCRIPTED_KEY",
        "wire_api": "responses",
    }
    config = {
        "model": "gpt-test",
        "model_provider": "scripted",
        "model_providers": {"scripted": scripted},
    }
    (home / "config.toml").write_text(tomli_w.dumps(config))
    env = {**os.environ, "CODEX_HOME": str(home), "SCRIPTED_KEY": KEY}
    command = [
        binary_path(str(codex_installed)),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "-C",
        str(workdir),
        "RUN echo hi\nSAY got {output}",
    ]
    done = subprocess.run(
        command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    items = [
        json.loads(line)["item"] for line in done.stdout.splitlines() if '"item.completed"' in line
    ]
    commands = [i for i in items if i["type"] == "command_execution"]
    assert commands and commands[0]["aggregated_output"].strip() == "hi"
    assert [i["text"] for i in items if i["type"] == "agent_message"] == ["got hi"]
    assert [r["answer"].get("tool") for r in provider.requests()] == ["exec_command", None]


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
    parts = [{"type": "text", "text": "FAIL 400 old turn"}, {"type": "text", "text": "SAY new"}]
    answer = oai.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": parts}]
    )
    assert answer.choices[0].message.content == "new"


# --- PARALLEL tool calls and IMAGES, on every wire -----------------------------------------

PARALLEL_SCRIPT = "PARALLEL RUN echo alpha\nPARALLEL RUN echo beta\nSAY got {outputs}"
PNG = bytes.fromhex("89504e470d0a1a0a") + b"scripted image bytes"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PNG_SEEN = f"image/png {len(PNG)}B sha256:{hashlib.sha256(PNG).hexdigest()[:12]}"


def test_parallel_groups_consecutive_lines_into_one_step() -> None:
    shell = ToolSpec("shell", {"properties": {"command": {"type": "string"}}})
    script = "RUN echo first\nPARALLEL RUN echo a\nPARALLEL RUN echo b\nRUN echo last\nSAY end"
    events = [Event("user", script)]
    assert [c.arguments for c in plan(events, [shell]).tool_calls] == ['{"command": "echo first"}']
    events += [Event("tool_call", "shell"), Event("tool_result", "first")]
    second = plan(events, [shell])
    assert [c.call_id for c in second.tool_calls] == ["call_s1_0", "call_s1_1"]
    assert [json.loads(c.arguments)["command"] for c in second.tool_calls] == ["echo a", "echo b"]
    events += [Event("tool_call", "shell"), Event("tool_call", "shell")]
    events.append(Event("tool_result", "a"))  # one of the two results only: the same step
    assert len(plan(events, [shell]).tool_calls) == 2
    events.append(Event("tool_result", "b"))
    assert plan(events, [shell]).tool_call.arguments == '{"command": "echo last"}'
    events += [Event("tool_call", "shell"), Event("tool_result", "last")]
    assert plan(events, [shell]).text == "end"


def test_responses_parallel_calls_interleave_their_argument_deltas(http: httpx.Client) -> None:
    body = {"model": "gpt-test", "stream": True, "tools": [EXEC_COMMAND]}
    answer = http.post(
        "/v1/responses",
        json={**body, "input": [user(PARALLEL_SCRIPT)]},
        headers={"authorization": f"Bearer {KEY}"},
    )
    events = [data for _, data in sse_events(answer.text)]
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    assert [(i["id"], i["call_id"]) for i in added] == [
        ("fc_s0_0", "call_s0_0"),
        ("fc_s0_1", "call_s0_1"),
    ]
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    order = [d["item_id"] for d in deltas]
    assert order[:2] == ["fc_s0_0", "fc_s0_1"]  # interleaved, not one call after the other
    for index, item_id in enumerate(["fc_s0_0", "fc_s0_1"]):
        joined = "".join(d["delta"] for d in deltas if d["item_id"] == item_id)
        assert {d["output_index"] for d in deltas if d["item_id"] == item_id} == {index}
        assert json.loads(joined)["cmd"] == ["echo alpha", "echo beta"][index]
    final = events[-1]["response"]["output"]
    assert [i["call_id"] for i in final] == ["call_s0_0", "call_s0_1"]

    history = [
        user(PARALLEL_SCRIPT),
        *final,
        {"type": "function_call_output", "call_id": "call_s0_0", "output": "alpha"},
        {"type": "function_call_output", "call_id": "call_s0_1", "output": "beta"},
    ]
    answer = http.post(
        "/v1/responses",
        json={**body, "stream": False, "input": history},
        headers={"authorization": f"Bearer {KEY}"},
    )
    assert answer.json()["output"][-1]["content"][0]["text"] == "got alpha | beta"


def test_chat_parallel_calls_stream_interleaved_by_index(oai: openai.OpenAI) -> None:
    messages: list[dict] = [{"role": "user", "content": PARALLEL_SCRIPT}]
    chunks = list(
        oai.chat.completions.create(
            model="gpt-test", messages=messages, tools=[CHAT_SHELL], stream=True
        )
    )
    pieces = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    heads = [(p.index, p.id) for p in pieces if p.id]
    assert heads == [(0, "call_s0_0"), (1, "call_s0_1")]
    fragments = [p for p in pieces if not p.id]
    assert [p.index for p in fragments[:2]] == [0, 1]  # interleaved
    joined = ["".join(p.function.arguments for p in fragments if p.index == i) for i in (0, 1)]
    assert [json.loads(j)["command"][2] for j in joined] == ["echo alpha", "echo beta"]

    whole = oai.chat.completions.create(model="gpt-test", messages=messages, tools=[CHAT_SHELL])
    calls = whole.choices[0].message.tool_calls
    assert [c.id for c in calls] == ["call_s0_0", "call_s0_1"]
    assert whole.choices[0].finish_reason == "tool_calls"
    messages += [
        whole.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_s0_0", "content": "alpha"},
        {"role": "tool", "tool_call_id": "call_s0_1", "content": "beta"},
    ]
    answer = oai.chat.completions.create(model="gpt-test", messages=messages)
    assert answer.choices[0].message.content == "got alpha | beta"


def test_anthropic_parallel_calls_are_consecutive_tool_use_blocks(http: httpx.Client) -> None:
    body = {"model": "claude-test", "max_tokens": 100, "tools": [BASH]}
    messages: list[dict] = [{"role": "user", "content": PARALLEL_SCRIPT}]
    answer = http.post(
        "/v1/messages",
        json={**body, "stream": True, "messages": messages},
        headers=anthropic_headers(),
    )
    events = sse_events(answer.text)
    names = [n for n, _ in events if n.startswith("content_block")]
    starts = [d["content_block"]["id"] for n, d in events if n == "content_block_start"]
    assert starts == ["toolu_s0_0", "toolu_s0_1"]
    # one block at a time: start, deltas, stop, then the next
    assert names[0] == "content_block_start" and names[-1] == "content_block_stop"
    assert names.count("content_block_stop") == 2
    assert names.index("content_block_stop") < len(names) - 1 - names[::-1].index(
        "content_block_start"
    )
    whole = http.post(
        "/v1/messages", json={**body, "messages": messages}, headers=anthropic_headers()
    ).json()
    uses = whole["content"]
    assert [(u["id"], u["input"]["command"]) for u in uses] == [
        ("toolu_s0_0", "echo alpha"),
        ("toolu_s0_1", "echo beta"),
    ]
    assert whole["stop_reason"] == "tool_use"
    results = [
        {"type": "tool_result", "tool_use_id": u["id"], "content": word}
        for u, word in zip(uses, ["alpha", "beta"], strict=True)
    ]
    messages += [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    final = http.post(
        "/v1/messages", json={**body, "messages": messages}, headers=anthropic_headers()
    ).json()
    assert final["content"][0]["text"] == "got alpha | beta"


def test_images_are_reported_from_every_wire(oai: openai.OpenAI, http: httpx.Client) -> None:
    responses = oai.responses.create(
        model="gpt-test",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "IMAGES"},
                    {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
                ],
            }
        ],
    )
    assert responses.output_text == f"images 1: {PNG_SEEN}"
    chat = oai.chat.completions.create(
        model="gpt-test",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "SAY seen {images}"},
                    {"type": "image_url", "image_url": {"url": PNG_URL}},
                    {"type": "image_url", "image_url": {"url": PNG_URL}},
                ],
            }
        ],
    )
    assert chat.choices[0].message.content == f"seen images 2: {PNG_SEEN}; {PNG_SEEN}"
    source = {"type": "base64", "media_type": "image/png", "data": PNG_URL.split(",")[1]}
    content = [{"type": "image", "source": source}, {"type": "text", "text": "IMAGES"}]
    body = {
        "model": "claude-test",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": content}],
    }
    answer = http.post("/v1/messages", json=body, headers=anthropic_headers()).json()
    assert answer["content"][0]["text"] == f"images 1: {PNG_SEEN}"
    none = oai.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "IMAGES"}]
    )
    assert none.choices[0].message.content == "images 0"
