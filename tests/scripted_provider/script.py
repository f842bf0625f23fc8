"""The wire-neutral script language and step machine of the scripted provider.

A wire adapter turns a request into a list of ``Event`` (user text, assistant text,
tool calls, tool results) and a list of ``ToolSpec``; ``plan`` decides the ``Reply``.

The anchor is the last user message holding at least one directive line (a line
that starts, after optional whitespace, with one of ``KEYWORDS``). The step is the
number of tool results after the anchor. A message without directive lines may still be an
anchor: ``plain.plain_directives`` reads the plain-English forms it stands for. See the package
README in ``__init__``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .plain import pick, plain_directives

KEYWORDS = (
    "SAY",
    "THINK",
    "RUN",
    "TOOL",
    "LOOP",
    "SLOW",
    "SLEEP",
    "FAIL",
    "REMEMBER",
    "RECALL",
    "PARALLEL",
    "IMAGES",
    "PICK",
    "TIMEOUT",
)
_DIRECTIVE = re.compile(r"^\s*(" + "|".join(KEYWORDS) + r")(?:[ \t]+(.*?))?\s*$")

# Shell tools, in order of preference, by name.
SHELL_TOOL_NAMES = (
    "exec_command",
    "shell",
    "shell_command",
    "Bash",
    "terminal",
    "run_shell_command",
    "bash",
    "run_commands",  # Cline: a list of commands
    "Shell",  # Kimi CLI
)

CHUNK = 4  # characters per streamed delta
SLOW_MIN_DELTAS = 20


@dataclass
class Event:
    """One conversation element, wire-neutral."""

    kind: str  # "user" | "assistant_text" | "tool_call" | "tool_result"
    text: str = ""


@dataclass
class ToolSpec:
    """A tool offered by the client."""

    name: str
    schema: dict = field(default_factory=dict)
    kind: str = "function"  # "function" | "custom"
    namespace: str | None = None


@dataclass
class ToolCall:
    """A tool call the provider decided to make."""

    call_id: str
    name: str
    arguments: str  # JSON text (function tools) or raw input (custom tools)
    kind: str = "function"
    namespace: str | None = None

    def input_object(self) -> dict:
        """The arguments as an object (``{}`` if they are not a JSON object)."""
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass
class Reply:
    """What to answer: an error, a tool call, or final text (plus optional thinking)."""

    tag: str = "s0"  # deterministic id suffix: step (and turn after the first)
    step: int = 0
    script: list[str] = field(default_factory=list)
    text: str = ""
    thinking: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)  # two or more: parallel calls
    slow: float = 0.0
    sleep: float = 0.0
    fail: tuple[int, str] | None = None

    @property
    def tool_call(self) -> ToolCall | None:
        """The first tool call (the only one unless the step is PARALLEL)."""
        return self.tool_calls[0] if self.tool_calls else None

    def deltas(self) -> list[str]:
        """The final text split into deterministic deltas."""
        return split_text(self.text, slow=self.slow > 0)

    def output_len(self) -> int:
        arguments = sum(len(call.arguments) for call in self.tool_calls)
        return len(self.text) + len(self.thinking or "") + arguments


def parse_directives(text: str) -> list[tuple[str, str]]:
    """The directive lines in ``text`` as ``(KEYWORD, argument)`` pairs, in order."""
    found = []
    for line in text.splitlines():
        match = _DIRECTIVE.match(line)
        if match:
            found.append((match.group(1), match.group(2) or ""))
    return found


def directives_in(text: str) -> list[tuple[str, str]]:
    """What a user message scripts: its directive lines, else the directives its plain-English
    requests stand for (``plain.plain_directives``)."""
    return parse_directives(text) or plain_directives(text)


def split_text(text: str, slow: bool = False, size: int = CHUNK) -> list[str]:
    """Split text into deltas of at most ``size`` characters (smaller when slow)."""
    if slow:
        size = max(1, min(size, len(text) // SLOW_MIN_DELTAS))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def usage(body_len: int, reply: Reply) -> tuple[int, int, int]:
    """Deterministic ``(input_tokens, output_tokens, reasoning_tokens)``."""
    reasoning = max(1, len(reply.thinking) // 4) if reply.thinking else 0
    return max(1, body_len // 4), max(1, reply.output_len() // 4), reasoning


def content_text(raw: object) -> str:
    """Flatten message or tool-result content (a string or a list of parts) to text."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        parts = [content_text(p.get("text", "")) if isinstance(p, dict) else str(p) for p in raw]
        return "\n".join(p for p in parts if p)
    if isinstance(raw, dict):
        return raw["text"] if isinstance(raw.get("text"), str) else json.dumps(raw)
    return "" if raw is None else str(raw)


_GEMINI_FIELDS = "Error|Exit Code|Signal|Background PIDs|Process Group PGID"
_COPILOT_SHELL_TRAILER = re.compile(r"\n?<shellId: [^>\n]*>\Z")
# OpenHands' terminal follows a command's output with bracketed lines about how it ended.
_OPENHANDS_SHELL_TRAILER = re.compile(
    r"(?:\n*\[(?:The command completed with exit code|Command finished with exit code|"
    r"Current working directory:|Python interpreter:)[^\]\n]*\])+\Z"
)

# Kimi CLI puts a note for the model first ("<system>Command executed successfully.</system>").
_KIMI_SYSTEM_NOTE = re.compile(r"\A<system>[^<]*</system>\n?")


def tool_output_text(raw: str) -> str:
    """The useful text of a tool result: a command's stdout where recognisable."""
    # Copilot CLI ends a command's output with "<shellId: 0 completed with exit code 0>".
    text = _COPILOT_SHELL_TRAILER.sub("", raw.strip()).strip()
    text = _OPENHANDS_SHELL_TRAILER.sub("", text).strip()
    text = _KIMI_SYSTEM_NOTE.sub("", text).strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and isinstance(value.get("output"), str):
        text = value["output"].strip()
    # Cline's run_commands answers a list, one {"query", "result", "success"} per command.
    parts = value if isinstance(value, list) and value else []
    if parts and all(isinstance(v, dict) and isinstance(v.get("result"), str) for v in parts):
        return "\n".join(v["result"].strip() for v in parts)
    # Qwen Code and Gemini CLI report "Command: …", "Output: <output>", then "Error: …".
    qwen = re.match(r"Command: .*?\nOutput: (.*?)\nError: ", text, re.S)
    if qwen:
        return qwen.group(1).strip()
    # Gemini CLI 0.61 wraps its report in <untrusted_context>: "Output: <output>", then lines
    # such as "Exit Code: …" and "Process Group PGID: …".
    if text.startswith("<untrusted_context>\n") and text.endswith("\n</untrusted_context>"):
        inner = text.removeprefix("<untrusted_context>\n").removesuffix("\n</untrusted_context>")
        gemini = re.match(r"Output: (.*?)(?:\n(?:" + _GEMINI_FIELDS + r"): |\Z)", inner, re.S)
        if gemini:
            return "" if gemini.group(1) == "(empty)" else gemini.group(1).strip()
    # Codex prefixes shell output with a header ending in an "Output:" line.
    lines = text.split("\n")
    for i, line in enumerate(lines[:10]):
        if line.strip() == "Output:":
            return "\n".join(lines[i + 1 :]).strip()
    return text


# The fences a CLI puts around an external tool's result to tell the model it is data:
# Gemini CLI's <untrusted_context>, Hermes' <untrusted_tool_result> (with a line saying so).
_DATA_FENCES = (
    re.compile(r"\A<untrusted_context>\n(.*)\n</untrusted_context>\Z", re.S),
    re.compile(
        r'\A<untrusted_tool_result source="[^"\n]*">\n[^\n]*\n\n(.*)\n</untrusted_tool_result>\Z',
        re.S,
    ),
)


# OpenHands CLI's first content part of every MCP result, before the tool's own.
_OPENHANDS_HEADER = re.compile(r"\A\[Tool '[^'\n]*' executed\.\]\n")


def mcp_result(output: str) -> str:
    """What an MCP tool answered, as a model reads it: inside the data fence a CLI puts
    around it (Gemini CLI, Hermes), after the line OpenHands CLI puts before it, the text of
    a string-returning tool out of the
    ``{"result": …}`` its structured content arrives in (Codex, Claude Code, Hermes) or the
    list of its content parts."""
    for fence in _DATA_FENCES:
        if fenced := fence.match(output):
            output = fenced.group(1)
            break
    output = _OPENHANDS_HEADER.sub("", output, count=1)
    try:
        value = json.loads(output)
    except ValueError:
        return output
    if isinstance(value, dict) and set(value) == {"result"} and isinstance(value["result"], str):
        return value["result"]
    # The MCP result's content parts themselves (Codex as codex-acp runs it).
    if isinstance(value, list) and value and all(_text_part(part) for part in value):
        return "".join(part["text"] for part in value)
    return output


def _text_part(part: object) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def find_shell_tool(tools: list[ToolSpec]) -> ToolSpec | None:
    """The preferred shell tool among the offered top-level tools."""
    by_name = {t.name: t for t in tools if t.namespace is None}
    for name in SHELL_TOOL_NAMES:
        if name in by_name:
            return by_name[name]
    return None


def shell_arguments(
    tool: ToolSpec, command: str, cwd: str = ".", timeout: float | None = None
) -> dict:
    """Arguments for ``tool`` that run ``command``, shaped by its JSON schema.

    ``timeout`` (seconds) fills every timeout property the schema offers, as a model does for a
    command it expects to be long; without it only a required one is filled (with 60 s).
    """
    props = tool.schema.get("properties") or {}
    required = tool.schema.get("required") or []
    if "cmd" in props:
        args: dict = {"cmd": command}
    elif props.get("commands", {}).get("type") == "array":
        args = {"commands": [command]}
    elif props.get("command", {}).get("type") == "array":
        args = {"command": ["bash", "-lc", command]}
    else:
        args = {"command": command}
    wanted = [*required, *(name for name in props if timeout and _waits(name))]
    for name in wanted:
        if name in args:
            continue
        if name in ("workdir", "cwd", "working_directory"):
            args[name] = cwd
        elif _waits(name):
            seconds = timeout or 60
            in_ms = name.endswith("ms") or tool.name == "Bash"
            args[name] = int(seconds * 1000) if in_ms else int(seconds)
    return args


def _waits(name: str) -> bool:
    """Whether a shell tool's property says how long to wait for the command's output:
    a timeout, or Codex's `yield_time_ms` (past it the command goes on unseen, its output
    never reported)."""
    return name.startswith("timeout") or name == "yield_time_ms"


@dataclass
class _Script:
    """The directives of one user message, gathered by kind."""

    says: list[str] = field(default_factory=list)
    picks: list[str] = field(default_factory=list)
    thinks: list[str] = field(default_factory=list)
    # Each step is a group of calls made in one reply: ("RUN"|"TOOL", argument) pairs.
    steps: list[list[tuple[str, str]]] = field(default_factory=list)
    images: bool = False
    remember: str | None = None
    recall: bool = False
    loop: bool = False
    slow: float = 0.0
    sleep: float = 0.0
    timeout: float | None = None  # seconds each RUN asks its shell tool for (TIMEOUT)
    fail: tuple[int, str] | None = None

    @classmethod
    def read(cls, directives: list[tuple[str, str]]) -> _Script:
        script = cls()
        previous = None
        for key, arg in directives:
            if key == "PARALLEL":
                call = _parallel_call(arg)
                if previous == "PARALLEL" and call:
                    script.steps[-1].append(call)
                elif call:
                    script.steps.append([call])
            elif key == "IMAGES":
                script.images = True
            elif key == "SAY":
                script.says.append(arg)
            elif key == "PICK":
                script.picks.append(arg)
            elif key == "THINK":
                script.thinks.append(arg)
            elif key in ("RUN", "TOOL"):
                script.steps.append([(key, arg)])
            elif key == "LOOP":
                script.loop = True
            elif key == "SLOW":
                script.slow = _float(arg)
            elif key == "SLEEP":
                script.sleep = _float(arg)
            elif key == "TIMEOUT":
                script.timeout = _float(arg) or None
            elif key == "FAIL":
                status, _, message = arg.partition(" ")
                code = int(status) if status.isdigit() else 400
                script.fail = (code, message.strip() or "scripted failure")
            elif key == "REMEMBER":
                script.remember = arg.split()[0] if arg.split() else ""
            elif key == "RECALL":
                script.recall = True
            previous = key
        return script

    def step_index(self, results: int) -> int:
        """How many steps the ``results`` tool results after the anchor have completed."""
        if self.loop:
            return results
        step = consumed = 0
        while step < len(self.steps) and consumed + len(self.steps[step]) <= results:
            consumed += len(self.steps[step])
            step += 1
        # Past the last step, each further result counts as one (as with single calls).
        return step + (results - consumed if step == len(self.steps) else 0)


def _parallel_call(arg: str) -> tuple[str, str] | None:
    """``PARALLEL RUN <command>`` / ``PARALLEL TOOL <name> <json>`` as a step's call."""
    key, _, rest = arg.strip().partition(" ")
    return (key, rest.strip()) if key in ("RUN", "TOOL") and rest.strip() else None


def _turn_finished(after: list[Event]) -> bool:
    """Whether a final assistant answer was followed by a new user message."""
    answered = False
    for event in after:
        if event.kind == "assistant_text":
            answered = True
        elif event.kind == "tool_call":
            answered = False
        elif event.kind == "user" and answered:
            return True
    return False


def _recall(earlier: list[Event]) -> str:
    words = [
        arg.split()[0]
        for event in earlier
        if event.kind == "user"
        for key, arg in parse_directives(event.text)
        if key == "REMEMBER" and arg.split()
    ]
    return f"you said {words[-1]}" if words else "nothing to recall"


def _float(value: str, default: float = 0.0) -> float:
    try:
        return max(0.0, float(value.split()[0]))
    except (ValueError, IndexError):
        return default


def _cwd(events: list[Event]) -> str:
    for event in reversed(events):
        match = re.search(r"<cwd>(.*?)</cwd>", event.text)
        if event.kind == "user" and match:
            return match.group(1)
    return "."


_SEPARATORS = re.compile(r"[_./-]+")


def _by_suffix(tools: list[ToolSpec], name: str) -> ToolSpec | None:
    """A tool named `name` under a CLI's own prefix for an MCP server's tools (e.g.
    ``mcp__server__name``, ``server.name``, ``mcp_server_name``), or a full name spelt with
    other separators (``mcp__vault__lookup`` is Gemini CLI's ``mcp_vault_lookup``), with or
    without the ``mcp`` prefix (it is OpenCode's ``vault_lookup``), or with no prefix at all
    (it is Kimi CLI's ``lookup``)."""
    for tool in tools:
        if any(tool.name.endswith(sep + name) for sep in ("__", ".", "_", "-", "/")):
            return tool

    def key(spelt: str) -> str:
        return _SEPARATORS.sub("_", spelt).removeprefix("mcp_")

    spelt_alike = next((t for t in tools if key(t.name) == key(name)), None)
    if spelt_alike is not None or not name.startswith("mcp__"):
        return spelt_alike
    # A CLI that offers an MCP server's tools by their own names (Kimi CLI): the part after
    # the server's, when exactly one tool is so named.
    bare = [t for t in tools if t.name == name.rsplit("__", 1)[-1]]
    return bare[0] if len(bare) == 1 else None


def plan(events: list[Event], tools: list[ToolSpec], images: list[str] | None = None) -> Reply:
    """Decide the reply for a conversation; ``images`` describes the request's image parts."""
    anchors = [i for i, e in enumerate(events) if e.kind == "user" and directives_in(e.text)]
    if not anchors:
        return Reply(text="ok")
    index = anchors[-1]
    directives = directives_in(events[index].text)
    after = events[index + 1 :]
    results = [e for e in after if e.kind == "tool_result"]
    script = _Script.read(directives)
    step = script.step_index(len(results))
    turn = len(anchors)
    reply = Reply(
        tag=f"s{step}" if turn == 1 else f"s{step}_t{turn}",
        step=step,
        script=[f"{key} {arg}".rstrip() for key, arg in directives],
    )
    if _turn_finished(after):
        reply.text = "ok"
        return reply

    reply.slow, reply.sleep, reply.fail = script.slow, script.sleep, script.fail
    reply.thinking = "\n".join(script.thinks) if script.thinks else None

    if script.loop:
        group: list[tuple[str, str]] = [("RUN", f"echo step {step + 1}")]
    else:
        group = script.steps[step] if step < len(script.steps) else []
    if group:
        suffixes = [f"_{n}" for n in range(len(group))] if len(group) > 1 else [""]
        calls = [
            _tool_call(f"call_{reply.tag}{suffix}", spec, events, tools, script.timeout)
            for suffix, spec in zip(suffixes, group, strict=True)
        ]
        if any(call is None for call in calls):
            reply.text = "no shell tool"
        else:
            reply.tool_calls = [call for call in calls if call]
        return reply

    outputs = [tool_output_text(r.text) for r in results]
    report = images_report(images or [])
    if script.says or script.picks:
        last = outputs[-1] if outputs else ""
        values = {
            "output": last,
            "outputs": " | ".join(outputs),
            "result": mcp_result(last) if outputs else "",
            "images": report,
        }
        # One pass, so that a tool's output holding "{output}" stays as it came.
        text = _PLACEHOLDER.sub(lambda m: values[m.group(1)], "\n".join(script.says))
        picked = [_picked(name, outputs) for name in script.picks]
        reply.text = "\n".join(line for line in (text, *picked) if line)
    elif script.images:
        reply.text = report
    elif script.recall:
        reply.text = _recall(events[:index])
    elif script.remember is not None:
        reply.text = f"noted {script.remember}"
    else:
        reply.text = "done"
    return reply


_PLACEHOLDER = re.compile(r"\{(output|outputs|result|images)\}")


def _picked(name: str, outputs: list[str]) -> str:
    """What PICK answers: the value the last tool result gives for ``name``."""
    value = pick(name, outputs[-1]) if outputs else None
    return value if value is not None else f"I found no {name}."


def images_report(images: list[str]) -> str:
    """What IMAGES answers: ``images 2: <one>; <two>``."""
    return f"images {len(images)}: " + "; ".join(images) if images else "images 0"


def _tool_call(
    call_id: str,
    spec: tuple[str, str],
    events: list[Event],
    tools: list[ToolSpec],
    timeout: float | None = None,
) -> ToolCall | None:
    """The call a RUN or TOOL directive makes (None: RUN without a shell tool)."""
    key, argument = spec
    if key == "RUN":
        shell = find_shell_tool(tools)
        if shell is None:
            return None
        args = shell_arguments(shell, argument, _cwd(events), timeout)
        return ToolCall(call_id, shell.name, json.dumps(args))
    name, _, raw_args = argument.strip().partition(" ")
    tool = next((t for t in tools if name in (t.name, f"{t.namespace}__{t.name}")), None)
    tool = tool or _by_suffix(tools, name)
    arguments = raw_args.strip() or "{}"
    if tool and tool.kind == "custom":
        try:
            value = json.loads(arguments)
            arguments = value if isinstance(value, str) else arguments
        except ValueError:
            pass
    return ToolCall(
        call_id,
        tool.name if tool else name,
        arguments,
        kind=tool.kind if tool else "function",
        namespace=tool.namespace if tool else None,
    )
