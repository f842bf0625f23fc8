"""Parallel tool calls and input images, end to end: the real CLI of the base under test, the
scripted provider behind the gateway, natively or (UHP_TEST_PROVIDER=chat) translated from a
Chat-Completions-only provider. What must hold: both calls of one model reply run, their two
results go back in the next model request in the provider's own shape, and the UHP output
pairs each function_call with its function_call_output; an input_image (inline and uploaded)
reaches the provider byte for byte on the bases that send images to the model."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import zlib
from typing import Any

import httpx
import pytest

from tests.support.base_under_test import BASE
from tests.support.schema import check_stream
from tests.support.sse import read_stream

pytestmark = pytest.mark.slow

MODEL_PATHS = ("/v1/responses", "/v1/chat/completions", "/v1/messages")


def png(rgb: tuple[int, int, int], size: int = 4) -> bytes:
    """A real, valid PNG of one colour (CLIs may check what they send)."""
    row = b"\x00" + bytes(rgb) * size
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    idat = zlib.compress(row * size)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


def seen(data: bytes, media_type: str = "image/png") -> str:
    """How the scripted provider's IMAGES describes an image it received."""
    return f"{media_type} {len(data)}B sha256:{hashlib.sha256(data).hexdigest()[:12]}"


def model_requests(provider: Any) -> list[dict[str, Any]]:
    return [r for r in provider.requests() if r["path"] in MODEL_PATHS]


def results_sent_back(request: dict[str, Any]) -> dict[str, str]:
    """{provider call id: result text} of the tool results a model request carries, read in
    the request's own wire shape; also checks that the calls they answer precede them."""
    body, path = request["body"], request["path"]
    if path == "/v1/responses":
        items = body["input"]
        called = {i["call_id"] for i in items if i.get("type") == "function_call"}
        results = {
            i["call_id"]: str(i["output"]) for i in items if i.get("type") == "function_call_output"
        }
    elif path == "/v1/chat/completions":
        messages = body["messages"]
        called = {
            c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []
        }
        results = {
            m["tool_call_id"]: json.dumps(m["content"]) for m in messages if m["role"] == "tool"
        }
    else:
        blocks = [
            b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
        ]
        called = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        results = {
            b["tool_use_id"]: json.dumps(b.get("content"))
            for b in blocks
            if b.get("type") == "tool_result"
        }
    assert set(results) <= called, "a result for a call the request does not carry"
    return results


def test_two_parallel_tool_calls_both_run_and_both_results_go_back(
    client: httpx.Client, provider: Any
) -> None:
    provider.reset()
    prompt = "PARALLEL RUN echo alpha-17\nPARALLEL RUN echo beta-29\nSAY got {outputs}"
    stream = read_stream(client, "POST", "/v1/responses", json={"input": prompt, "stream": True})
    final = check_stream(stream.events)
    assert final["status"] == "completed", final.get("error")

    calls = [i for i in final["output"] if i["type"] == "function_call"]
    outputs = [i for i in final["output"] if i["type"] == "function_call_output"]
    assert len(calls) == 2 and len(outputs) == 2, [i["type"] for i in final["output"]]
    assert len({c["call_id"] for c in calls}) == 2
    assert {c["call_id"] for c in calls} == {o["call_id"] for o in outputs}
    by_call = {o["call_id"]: o["output"] for o in outputs}
    for word in ("alpha-17", "beta-29"):
        call = next(c for c in calls if f"echo {word}" in c["arguments"])
        assert word in by_call[call["call_id"]]
    text = "".join(
        p["text"] for i in final["output"] if i["type"] == "message" for p in i["content"]
    )
    assert text.startswith("got ") and "alpha-17" in text and "beta-29" in text
    done = [e["item"]["type"] for e in stream.events if e["type"] == "response.output_item.done"]
    assert done.count("function_call") == 2 and done.count("function_call_output") == 2

    # The model made both calls in ONE reply; the next request that answers them carries
    # both results. (A CLI may ask the model something else between the two: the Claude Agent
    # SDK's Claude Code asks which files each command's output showed, with no tool results,
    # while its calls run.)
    requests = model_requests(provider)
    parallel = [r for r in requests if "tools" in (r.get("answer") or {})]
    assert len(parallel) == 1, [r.get("answer") for r in requests]
    later = requests[requests.index(parallel[0]) + 1 :]
    results = next(filter(None, map(results_sent_back, later)), {})
    assert len(results) == 2, results
    words = [[w for w in ("alpha-17", "beta-29") if w in text] for text in results.values()]
    assert sorted(w for found in words for w in found) == ["alpha-17", "beta-29"], results


def test_an_input_image_reaches_the_model_intact(client: httpx.Client, provider: Any) -> None:
    inline, uploaded = png((200, 30, 30)), png((20, 40, 220), size=6)
    upload = client.post("/v1/files", files={"file": ("blue.png", uploaded, "image/png")})
    assert upload.status_code == 200, upload.text
    provider.reset()
    content = [
        {"type": "input_text", "text": "IMAGES"},
        {
            "type": "input_image",
            "image_url": "data:image/png;base64," + base64.b64encode(inline).decode(),
        },
        {"type": "input_image", "file_id": upload.json()["id"]},
    ]
    answer = client.post("/v1/responses", json={"input": [{"role": "user", "content": content}]})
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["status"] == "completed", result.get("error")
    text = "".join(
        p["text"] for i in result["output"] if i["type"] == "message" for p in i["content"]
    )
    if BASE.sends_images:
        assert text == f"images 2: {seen(inline)}; {seen(uploaded)}"
    else:
        assert text == "images 0"
    # Either way the files are in the workspace and the prompt names them (the agent's own
    # request: a CLI may first have the model describe the image in a call of its own).
    prompts = [json.dumps(request["body"]) for request in model_requests(provider)]
    assert any(
        "Attached files (in the working directory)" in prompt and "blue.png" in prompt
        for prompt in prompts
    ), prompts[0][:2000]
