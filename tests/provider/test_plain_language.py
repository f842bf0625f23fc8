"""The scripted provider's plain-English layer: the sentences a conformance suite sends, acted
out as a model would, whatever text they carry."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.provider.wire_helpers import CODEX_OUTPUT
from tests.scripted_provider.plain import (
    ANSWER_SECONDS,
    COUNT_SECONDS_PER_NUMBER,
    attached_files,
    pick,
    plain_directives,
)
from tests.scripted_provider.script import Event, Reply, ToolSpec, plan

SHELL = ToolSpec("exec_command", {"properties": {"cmd": {"type": "string"}}, "required": ["cmd"]})
ATTACHED = "Attached files (in the working directory): ./token.txt (text/plain, 33 bytes)"


def command_of(reply: Reply) -> str:
    (call,) = reply.tool_calls
    assert call.name == "exec_command"
    return json.loads(call.arguments)["cmd"]


def shell_result(output: str) -> Event:
    """A tool result as Codex reports a command's output (a header, then `Output:`)."""
    return Event("tool_result", f"Exit code: 0\nWall time: 0.1 seconds\nOutput:\n{output}")


def run(command: str, cwd: Path) -> str:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize("text", ["ok", "two", "Hello, world: 42 {x}", "uhp-1a2b"])
def test_reply_with_exactly_replies_the_text(text: str) -> None:
    reply = plan([Event("user", f"Reply with exactly: {text}")], [SHELL])
    assert reply.text == text and not reply.tool_calls
    assert reply.slow == ANSWER_SECONDS  # streamed at a model's pace, not all at once


def test_a_continued_session_answers_its_newest_request() -> None:
    events = [
        Event("user", "Reply with exactly: ok"),
        Event("assistant_text", "ok"),
        Event("user", "Reply with exactly: two"),
    ]
    assert plan(events, [SHELL]).text == "two"


def test_a_request_counts_only_on_a_line_of_its_own() -> None:
    assert plan([Event("user", "Please Reply with exactly: yes")], []).text == "ok"
    assert plan([Event("user", "<context>\n  Reply with exactly: yes\n</context>")], []).text == (
        "yes"
    )


def test_directive_lines_win_over_plain_english() -> None:
    assert plan([Event("user", "Reply with exactly: no\nSAY yes")], []).text == "yes"


def test_counting_slowly_streams_one_number_a_line_over_its_pace() -> None:
    reply = plan([Event("user", "Count slowly from 1 to 200, one number per line.")], [SHELL])
    assert reply.text == "\n".join(str(n) for n in range(1, 201))
    assert reply.slow == 200 * COUNT_SECONDS_PER_NUMBER
    assert not reply.tool_calls


def test_counting_without_slowly_goes_at_the_answer_pace() -> None:
    reply = plan([Event("user", "Count from 3 to 1.")], [])
    assert (reply.text, reply.slow) == ("3, 2, 1", ANSWER_SECONDS)


def test_a_value_from_the_attached_file_is_read_with_the_shell_then_picked() -> None:
    prompt = f"Reply with only the secret token from the attached file.\n\n{ATTACHED}"
    events = [Event("user", prompt)]
    assert command_of(plan(events, [SHELL])) == "cat ./token.txt"
    events += [Event("tool_call", "exec_command"), shell_result("The secret token is uhp-9f8e.")]
    assert plan(events, [SHELL]).text == "uhp-9f8e"


def test_a_value_the_file_does_not_give_is_not_made_up() -> None:
    prompt = f"Reply with only the secret token from the attached file.\n\n{ATTACHED}"
    events = [Event("user", prompt), Event("tool_call", "x"), shell_result("nothing here")]
    assert plan(events, [SHELL]).text == "I found no secret token."


def test_with_no_file_attached_nothing_is_read() -> None:
    reply = plan([Event("user", "Reply with only the secret token from the attached file.")], [])
    assert reply.text == "No file is attached." and not reply.tool_calls


def test_the_attachment_note_names_files_in_order() -> None:
    note = (
        "Attached files (in the working directory): ./my notes (v2).txt (text/plain, 5 bytes), "
        "./dot.png (image/png, 68 bytes)"
    )
    assert attached_files(f"look\n\n{note}") == ["my notes (v2).txt", "dot.png"]
    assert attached_files("no note") == []


def test_an_attached_name_with_spaces_is_quoted_for_the_shell(tmp_path: Path) -> None:
    (tmp_path / "my token.txt").write_text("token: abc")
    note = "Attached files (in the working directory): ./my token.txt (text/plain, 10 bytes)"
    reply = plan(
        [Event("user", f"Reply with only the token from the attached file.\n{note}")], [SHELL]
    )
    assert run(command_of(reply), tmp_path) == "token: abc"


@pytest.mark.parametrize(
    ("text", "name", "value"),
    [
        ("The secret token is uhp-1a2b3c4d.", "secret token", "uhp-1a2b3c4d"),
        ("secret token: x1,", "secret token", "x1"),
        ("TOKEN = 'abc'", "token", "abc"),
        ("the token isn't here", "token", None),
    ],
)
def test_pick_finds_the_value_a_text_gives_for_a_name(
    text: str, name: str, value: str | None
) -> None:
    assert pick(name, text) == value


@pytest.mark.parametrize("content", ["artifact-ok", "it's $HOME; `x` \\n", ""])
def test_a_file_created_holds_exactly_the_content(tmp_path: Path, content: str) -> None:
    prompt = f"Create a file named uhp-conformance.txt containing exactly: {content}"
    events = [Event("user", prompt)]
    run(command_of(plan(events, [SHELL])), tmp_path)
    assert (tmp_path / "uhp-conformance.txt").read_bytes() == content.encode()
    events += [Event("tool_call", "exec_command"), shell_result("")]
    assert plan(events, [SHELL]).text == "Created uhp-conformance.txt."


@pytest.mark.parametrize("offered", ["uhp_echo", "mcp__conformance-http__uhp_echo"])
def test_a_named_tool_is_called_with_the_text_and_its_answer_returned(offered: str) -> None:
    prompt = (
        "Call the tool uhp_echo with the text 5d41402abc and reply with exactly what it "
        "returns, nothing else."
    )
    tools = [SHELL, ToolSpec(offered, {"properties": {"text": {"type": "string"}}})]
    events = [Event("user", prompt)]
    (call,) = plan(events, tools).tool_calls
    assert (call.name, json.loads(call.arguments)) == (offered, {"text": "5d41402abc"})
    events += [Event("tool_call", offered), Event("tool_result", "UHP-FIXTURE:cba20414d5")]
    assert plan(events, tools).text == "UHP-FIXTURE:cba20414d5"


def test_a_tool_answer_in_structured_content_is_replied_as_its_text() -> None:
    prompt = "Call the tool echo with the text hi there and reply with exactly what it returns."
    events = [Event("user", prompt), Event("tool_call", "echo")]
    # How Codex shows an MCP tool's answer: its structured content, after the shell-like header.
    events.append(shell_result('{"result":"ereht ih"}'))
    assert plan(events, [SHELL, ToolSpec("echo")]).text == "ereht ih"
    events[-1] = shell_result('{"result": 1, "more": 2}')  # not a tool's string: as it came
    assert plan(events, [SHELL, ToolSpec("echo")]).text == '{"result": 1, "more": 2}'


def test_a_shell_command_is_run_and_its_output_replied(tmp_path: Path) -> None:
    command = "echo hello; touch /proc/probe 2>&1 | tail -1; echo RC=$?"
    prompt = f"Run this shell command and reply with its output only, nothing else: {command}"
    events = [Event("user", prompt)]
    assert command_of(plan(events, [SHELL])) == command
    events += [Event("tool_call", "exec_command"), Event("tool_result", CODEX_OUTPUT)]
    assert plan(events, [SHELL]).text == "hi"  # CODEX_OUTPUT's output


def test_requests_in_one_message_are_acted_out_in_order() -> None:
    message = "Run this shell command and reply with its output only: date\nReply with exactly: x"
    assert plain_directives(message) == [
        ("SLOW", f"{ANSWER_SECONDS:g}"),
        ("RUN", "date"),
        ("SAY", "{output}"),
        ("SAY", "x"),
    ]


def test_a_message_with_no_request_stays_the_default() -> None:
    assert plain_directives("hello there\nwhat is 2 + 2?") == []
    assert plan([Event("user", "hello there")], [SHELL]).text == "ok"


def test_ask_me_first_asks_the_question_then_says_the_answer() -> None:
    ask = ToolSpec("ask_user", {"properties": {"question": {"type": "string"}}})
    message = Event("user", "Ask me first: which files do you mean?")
    (call,) = plan([message], [SHELL, ask]).tool_calls
    assert call.name == "ask_user"
    assert json.loads(call.arguments) == {"question": "which files do you mean?"}
    answered = plan(
        [message, Event("tool_call"), Event("tool_result", "Only the .py ones.")], [ask]
    )
    assert answered.text == "You answered: Only the .py ones." and not answered.tool_calls
