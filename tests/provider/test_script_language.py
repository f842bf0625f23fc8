"""The scripted provider's script language, wire-neutral: directives, tool outputs, plans."""

from __future__ import annotations

import json

import pytest

from tests.provider.wire_helpers import CODEX_OUTPUT
from tests.scripted_provider.script import (
    Event,
    ToolSpec,
    parse_directives,
    plan,
    shell_arguments,
    tool_output_text,
)

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


def test_a_timeout_fills_every_timeout_property_the_schema_offers() -> None:
    codex = {"properties": {"cmd": {"type": "string"}, "yield_time_ms": {}}}
    assert shell_arguments(ToolSpec("shell", codex), "ls", timeout=30)["yield_time_ms"] == 30000
    seconds = {"properties": {"command": {"type": "string"}, "timeout": {}}}
    assert shell_arguments(ToolSpec("shell", seconds), "ls", timeout=90)["timeout"] == 90
    assert "yield_time_ms" not in shell_arguments(ToolSpec("shell", codex), "ls")
    script = "TIMEOUT 30\nRUN ls"
    call = plan([Event("user", script)], [ToolSpec("shell", codex)]).tool_call
    assert call is not None and json.loads(call.arguments)["yield_time_ms"] == 30000


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
    last = plan(events, [shell]).tool_call
    assert last is not None and last.arguments == '{"command": "echo last"}'
    events += [Event("tool_call", "shell"), Event("tool_result", "last")]
    assert plan(events, [shell]).text == "end"


def test_placeholders_are_filled_once_not_inside_what_they_bring() -> None:
    shell = ToolSpec("shell", {"properties": {"command": {"type": "string"}}})
    events = [Event("user", "RUN echo x\nSAY got {output} of {outputs}")]
    events += [Event("tool_call", "shell"), Event("tool_result", "{outputs} {images}")]
    assert plan(events, [shell]).text == "got {outputs} {images} of {outputs} {images}"
