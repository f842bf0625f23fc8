"""PARALLEL tool calls and IMAGES over every wire of the scripted provider."""

from __future__ import annotations

import json
from typing import cast

import httpx
import openai
from openai.types.chat import ChatCompletionAssistantMessageParam, ChatCompletionMessageParam

from tests.provider.wire_helpers import (
    BASH,
    CHAT_SHELL,
    EXEC_COMMAND,
    KEY,
    PARALLEL_SCRIPT,
    PNG_SEEN,
    PNG_URL,
    anthropic_headers,
    function_of,
    sse_events,
    user,
)


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
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": PARALLEL_SCRIPT}]
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
    joined = [
        "".join(function_of(p).arguments or "" for p in fragments if p.index == i) for i in (0, 1)
    ]
    assert [json.loads(j)["command"][2] for j in joined] == ["echo alpha", "echo beta"]

    whole = oai.chat.completions.create(model="gpt-test", messages=messages, tools=[CHAT_SHELL])
    calls = whole.choices[0].message.tool_calls
    assert calls is not None and [c.id for c in calls] == ["call_s0_0", "call_s0_1"]
    assert whole.choices[0].finish_reason == "tool_calls"
    # The answer's message goes back as it came, in the assistant message's shape.
    said = whole.choices[0].message.model_dump(exclude_none=True)
    messages += [
        cast(ChatCompletionAssistantMessageParam, said),
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
    names = [n for n, _ in events if n and n.startswith("content_block")]
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
