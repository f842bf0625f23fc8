"""The Oumi harness door's pure parts: reading bodies, rendering output as chat messages,
and failure messages fit to show."""

from __future__ import annotations

from typing import cast

import pytest

from uhp_server.doors.oumi_harness.service import OumiInvocations, readable
from uhp_server.doors.oumi_harness.transcript import chat_messages, door_call_id
from uhp_server.doors.oumi_harness.wire import parse_submission, status_object
from uhp_server.engine import Engine, SessionKey
from uhp_server.errors import ApiError

CONNECTION = {"base_url": "https://x/v1", "model": "m", "api_key": "k"}


def body(**changes: object) -> dict:
    base = {
        "protocol_version": "1",
        "session_id": "s",
        "invocation_id": "i",
        "session_action": "start",
        "input_messages": [{"role": "user", "content": "hi"}],
        "model_connection": CONNECTION,
    }
    return {**base, **changes}


def call(call_id: str, name: str = "shell", arguments: str = "{}") -> dict:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def result(call_id: str, output: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def text(value: str) -> dict:
    return {"type": "message", "content": [{"type": "output_text", "text": value}]}


def test_a_start_keeps_its_opening_conversation_and_connection() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "out"},
        {"role": "user", "content": "go"},
    ]
    settings = {"temperature": 0.1}
    sub = parse_submission(
        body(
            input_messages=messages,
            model_connection={**CONNECTION, "generation_settings": settings},
        )
    )
    assert [m.role for m in sub.messages] == ["system", "user", "assistant", "tool", "user"]
    assert sub.messages[1].content == "ab" and sub.messages[2].tool_calls[0].name == "f"
    assert sub.connection.generation == settings and sub.connection.api_key == "k"


@pytest.mark.parametrize(
    "changes",
    [
        {"protocol_version": "2"},
        {"session_action": "begin"},
        {"input_messages": []},
        {"input_messages": [{"role": "assistant", "content": "x"}]},
        {"input_messages": [{"role": "user"}]},
        {"session_action": "resume"},  # a user message in a resume
        {"session_action": "resume", "input_messages": [{"role": "tool", "content": "x"}]},
        {"model_connection": {"base_url": "https://x/v1"}},
        {"invocation_id": ""},
    ],
)
def test_bad_bodies_are_400(changes: dict) -> None:
    with pytest.raises(ApiError) as refused:
        parse_submission(body(**changes))
    assert refused.value.status == 400


def test_the_status_object_has_an_error_exactly_when_failed() -> None:
    assert "error" not in status_object("s", "i", "running")
    assert status_object("s", "i", "failed", "boom")["error"] == {"message": "boom"}
    assert status_object("s", "i", "failed", "")["error"]["message"]


def test_output_groups_calls_answers_them_and_ends_with_the_pending_question() -> None:
    output = [
        text("looking"),
        call("a"),
        call("b"),
        result("b", "B"),
        result("a", "A"),
        call("q", "ask_user", '{"question": "which?"}'),
    ]
    messages = chat_messages("resp_1", output, pending={"q"})
    assert [m["role"] for m in messages] == ["assistant", "assistant", "tool", "tool", "assistant"]
    ids = [c["id"] for c in messages[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in messages[2:4]] == ids
    assert [m["content"] for m in messages[2:4]] == ["A", "B"]
    assert messages[-1]["tool_calls"][0]["function"]["name"] == "ask_user"
    assert messages[-1]["tool_calls"][0]["id"] == door_call_id("resp_1", "q")


def test_output_after_a_resume_starts_after_the_answered_question() -> None:
    output = [call("q", "ask_user"), result("q", "Rome"), text("Rome it is")]
    assert chat_messages("r", output, pending=set()) == [
        {"role": "assistant", "content": "Rome it is"}
    ]


def test_ids_are_unique_across_turns_and_an_output_always_ends_with_an_assistant() -> None:
    assert door_call_id("resp_1", "item_0") != door_call_id("resp_2", "item_0")
    messages = chat_messages("r", [call("a")], pending=set())
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"]
    assert messages[1]["content"]  # a call without a reported result is still answered


def test_failure_messages_carry_no_url_path_or_key() -> None:
    raw = (
        "unexpected status 401 from http://127.0.0.1:4000/gateway/openai/v1/responses "
        "with key sk-abcdef123456 and token uhpgw_zzzzzzzz in /tmp/x/y/config.toml"
    )
    shown = readable(raw)
    for secret in ("127.0.0.1", "sk-abcdef", "uhpgw_", "/tmp/x"):
        assert secret not in shown
    assert "401" in shown
    assert readable("") and len(readable("x" * 5000)) == 1000


class NoInvocations:
    """An engine that knows no invocation, and none that was deleted either."""

    def __init__(self) -> None:
        self.started: list[object] = []

    async def latest_in_session(self, principal_id: str, harness_id: str, key: SessionKey) -> None:
        return None

    async def door_session_gone(self, principal_id: str, harness_id: str, key: SessionKey) -> bool:
        return False

    async def start(self, task: object) -> None:
        self.started.append(task)
        raise AssertionError("a resume never starts a turn")


async def test_a_resume_of_an_unknown_invocation_fails_only_its_row() -> None:
    """The errors table: 401, 403 and 404 fail the whole evaluation, any other 4xx the row.
    A resume is of an invocation Oumi submitted, so the server answers a 400, starting none."""
    engine = NoInvocations()
    door = OumiInvocations(cast(Engine, engine))
    resume = body(
        session_action="resume",
        input_messages=[{"role": "tool", "tool_call_id": "c", "content": "x"}],
    )
    with pytest.raises(ApiError) as refused:
        await door.submit("p", "h", parse_submission(resume))
    assert refused.value.status == 400 and refused.value.status not in (401, 403, 404, 409)
    assert engine.started == []
