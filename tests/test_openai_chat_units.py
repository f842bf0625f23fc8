"""The Chat Completions door's pure parts: history matching and rendering the event log."""

from __future__ import annotations

from typing import Any

import pytest

from uhp_server.doors.openai_chat.conversation import (
    Turn,
    answered,
    conversation_digest,
    split_request,
)
from uhp_server.doors.openai_chat.models import slug
from uhp_server.doors.openai_chat.render import ChatRenderer, describe_call, describe_output
from uhp_server.doors.openai_chat.shapes import ChunkWriter, CompletionIds, completion
from uhp_server.errors import ApiError


def test_the_key_of_an_answer_is_what_the_next_request_continues_from() -> None:
    first = split_request(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    key = answered(first, "hello\n\nFiles:\n- [a.txt](http://x/a)")
    resent: list[dict[str, Any]] = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        # A client that folds reasoning into the text and reflows whitespace still matches.
        {
            "role": "assistant",
            "content": "<think>so</think> hello Files:\n\n- [a.txt](http://x/a) ",
        },
        {"role": "user", "content": "next"},
    ]
    again = split_request(resent)
    assert again.history_digest == key
    assert again.input == "next" and again.instructions == "be brief"
    edited = [*resent[:1], {"role": "user", "content": "hi!"}, *resent[2:]]
    assert split_request(edited).history_digest != key


def test_details_reasoning_blocks_are_dropped_but_other_details_count() -> None:
    plain = conversation_digest([Turn("assistant", "answer")])
    folded = '<details type="reasoning" done="true">\n<summary>Thought</summary>x\n</details>answer'
    assert conversation_digest([Turn("assistant", folded)]) == plain
    kept = "<details><summary>More</summary>x</details>answer"
    assert conversation_digest([Turn("assistant", kept)]) != plain


def test_a_new_chat_has_no_history_key_and_trailing_user_messages_are_the_input() -> None:
    chat = split_request([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
    assert chat.history_digest is None and chat.input == "one\n\ntwo" and chat.history == ()


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "prefill"}],
        [{"role": "user", "content": "  "}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
    ],
)
def test_requests_the_door_cannot_answer_are_clear_400s(messages: list[dict[str, Any]]) -> None:
    with pytest.raises(ApiError) as caught:
        split_request(messages)
    param = caught.value.param
    assert caught.value.status == 400 and param is not None and param.startswith("messages")


def _events() -> list[dict[str, Any]]:
    def text(item: str, delta: str) -> dict[str, Any]:
        return {"type": "response.output_text.delta", "item_id": item, "delta": delta}

    call = {
        "type": "function_call",
        "name": "shell",
        "arguments": '{"command":["bash","-lc","ls -la"]}',
    }
    output = {"type": "function_call_output", "output": "total 8\nfile.txt\n"}
    citation = {"filename": "out/report.md", "file_id": "f1", "download_url": "http://h/f1/content"}
    return [
        {"type": "response.created", "response": {}},
        {"type": "response.reasoning_summary_text.delta", "item_id": "r1", "delta": "Looking"},
        text("m1", "First "),
        text("m1", "part."),
        {"type": "response.output_item.done", "item": call},
        {"type": "response.output_item.done", "item": output},
        text("m2", "Second part."),
        {"type": "response.output_text.annotation.added", "annotation": citation},
        {"type": "response.completed", "response": {"status": "completed", "usage": None}},
    ]


def test_rendering_separates_messages_summarises_tools_and_links_files() -> None:
    renderer = ChatRenderer()
    pieces = [piece for event in _events() for piece in renderer.feed(event)]
    assert renderer.text == (
        "First part.\n\nSecond part.\n\nFiles:\n- [out/report.md](http://h/f1/content)"
    )
    assert renderer.reasoning_text == "Looking\n→ shell: ls -la\n← 2 lines: total 8\n"
    assert "".join(p.content for p in pieces) == renderer.text
    ids = CompletionIds.for_response("resp_1", 1, "m")
    message = completion(ids, renderer)["choices"][0]["message"]
    assert message["content"] == renderer.text
    assert message["reasoning_content"] == renderer.reasoning_text
    closing = ChunkWriter(ids, include_usage=True).closing(renderer.final or {})
    assert closing[-1]["choices"] == [] and closing[-1]["usage"]["total_tokens"] == 0


def test_tool_descriptions_stay_on_one_short_line() -> None:
    assert describe_call('{"cmd": "echo hi"}') == "echo hi"
    assert describe_call('{"path": "a.txt"}') == '{"path": "a.txt"}'
    assert describe_call("not json") == "not json"
    assert len(describe_call('{"cmd": "' + "x" * 500 + '"}')) == 160
    assert describe_output("") == "(no output)"
    assert describe_output("only line") == "only line"


def test_model_slugs_are_readable() -> None:
    assert slug("Codex (default)") == "codex-default"
    assert slug("!!!") == "harness"
