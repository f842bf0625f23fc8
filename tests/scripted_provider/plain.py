"""Plain English for the scripted provider: the requests a protocol's conformance suite sends.

The UHP conformance suite talks to a server the way a client does, in sentences meant for a
real model ("Reply with exactly: ok"). With no model here, this layer reads the few sentence
forms such a client uses and answers each as a model would, by turning it into directive
steps: a reply, a shell command run with the CLI's own shell tool, a call of a named tool, a
slow stream. Each form is a general pattern, never a canned answer: "Reply with exactly: <text>"
replies <text>, whatever the text is, so the CLI, the sandbox and the server do the real work.

A form is recognised on a line of its own (after optional whitespace), as directives are;
explicit directives in the same message win, so no scripted test changes meaning. Every answer
streams over ``ANSWER_SECONDS`` at least, as a real model's takes time.

- ``Reply with exactly: <text>``: SAY <text> (a text holding a SAY placeholder, ``{output}``,
  is answered with it filled in, as SAY does).
- ``Count [slowly] from <a> to <b>[, one number per line].``: the numbers, one a line (else
  joined by ", "); slowly, streamed at ``COUNT_SECONDS_PER_NUMBER`` a number.
- ``Reply with only the <name> from the attached file.``: ``cat`` the first file of the
  server's attachment note, then PICK <name> from it.
- ``Create a file named <file> containing exactly: <content>``: write it with the shell
  (no newline added), then say so.
- ``Call the tool <tool> with the text <text> and reply with exactly what it returns[, nothing
  else].``: TOOL <tool> {"text": <text>} (under the name the CLI offers it by, such as
  ``mcp__<server>__<tool>``), then SAY what it answered (``{result}``).
- ``Run this shell command and reply with its output only[, nothing else]: <command>``: RUN it,
  then SAY its output.
- ``Ask me first: <question>``: TOOL ask_user {"question": <question>} (the question tool the
  server offers, as the documentation's examples of a question use it), then SAY
  ``You answered: <the answer>``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable

Directive = tuple[str, str]

# A model takes its time: a plain-English answer streams over this many seconds, as a real one's
# does. A stand-in that answered in a few milliseconds would end a task before a client could
# tell a progressive stream from one buffered to the end (the suite skips S-09 under half a second).
ANSWER_SECONDS = 1.0
# "Slowly" is as slow as a real model streaming a long count, and slower than a client's patience
# for a cancel to land (the suite waits 90 s), so a cancel that never stops the agent shows.
COUNT_SECONDS_PER_NUMBER = 0.5
# A count past this many numbers is cut short, as a model's output limit would.
COUNT_LIMIT = 10_000

# How the server tells the agent where the task's files are (engine/attachments.prompt_note):
# "Attached files (in the working directory): ./a.txt (text/plain, 33 bytes), ./b.png (…)".
_ATTACHED_NOTE = re.compile(r"^\s*Attached files \(in the working directory\): (.*)$", re.M)
_ATTACHED_FILE = re.compile(r"\./(.+?) \([^()]*, \d+ bytes\)")


def _line(pattern: str) -> re.Pattern[str]:
    """A form that fills one line, matched case-insensitively after optional whitespace."""
    return re.compile(r"^[ \t]*" + pattern + r"[ \t]*$", re.I | re.M)


_REPLY_EXACTLY = _line(r"Reply with exactly: ?(?P<text>.*?)")
_COUNT = _line(
    r"Count (?P<slowly>slowly )?from (?P<first>\d+) to (?P<last>\d+)"
    r"(?P<per_line>, one number per line)?\.?"
)
_FROM_ATTACHED = _line(r"Reply with only the (?P<name>.+?) from the attached file\.?")
_CREATE_FILE = _line(r"Create a file named (?P<file>\S+) containing exactly: ?(?P<content>.*?)")
_CALL_TOOL = _line(
    r"Call the tool (?P<tool>\S+) with the text (?P<text>.+?) and reply with exactly what it"
    r" returns(?:, nothing else)?\.?"
)
_RUN_COMMAND = _line(
    r"Run this shell command and reply with its output only(?:, nothing else)?: ?(?P<command>.+?)"
)

_ASK_FIRST = _line(r"Ask me first: ?(?P<question>.+?)")


def _reply_exactly(match: re.Match[str], message: str) -> list[Directive]:
    return [("SAY", match["text"])]


def _count(match: re.Match[str], message: str) -> list[Directive]:
    first, last = int(match["first"]), int(match["last"])
    step = 1 if last >= first else -1
    numbers = [str(n) for n in range(first, last + step, step)][:COUNT_LIMIT]
    says = [("SAY", n) for n in numbers] if match["per_line"] else [("SAY", ", ".join(numbers))]
    if not match["slowly"]:
        return says
    return [("SLOW", f"{len(numbers) * COUNT_SECONDS_PER_NUMBER:g}"), *says]


def _from_attached(match: re.Match[str], message: str) -> list[Directive]:
    files = attached_files(message)
    if not files:
        return [("SAY", "No file is attached.")]
    return [("RUN", f"cat ./{shlex.quote(files[0])}"), ("PICK", match["name"])]


def _create_file(match: re.Match[str], message: str) -> list[Directive]:
    name, content = match["file"], match["content"]
    write = f"printf %s {shlex.quote(content)} > {shlex.quote(name)}"
    return [("RUN", write), ("SAY", f"Created {name}.")]


def _call_tool(match: re.Match[str], message: str) -> list[Directive]:
    arguments = json.dumps({"text": match["text"]})
    return [("TOOL", f"{match['tool']} {arguments}"), ("SAY", "{result}")]


def _run_command(match: re.Match[str], message: str) -> list[Directive]:
    return [("RUN", match["command"]), ("SAY", "{output}")]


def _ask_first(match: re.Match[str], message: str) -> list[Directive]:
    arguments = json.dumps({"question": match["question"]})
    return [("TOOL", f"ask_user {arguments}"), ("SAY", "You answered: {output}")]


_FORMS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], str], list[Directive]]], ...] = (
    (_REPLY_EXACTLY, _reply_exactly),
    (_COUNT, _count),
    (_FROM_ATTACHED, _from_attached),
    (_CREATE_FILE, _create_file),
    (_CALL_TOOL, _call_tool),
    (_RUN_COMMAND, _run_command),
    (_ASK_FIRST, _ask_first),
)


def plain_directives(message: str) -> list[Directive]:
    """The directives the plain-English requests in ``message`` stand for, in the order the
    requests appear (none: ``[]``)."""
    found: list[tuple[int, list[Directive]]] = []
    for pattern, translate in _FORMS:
        for match in pattern.finditer(message):
            found.append((match.start(), translate(match, message)))
    directives = [
        directive for _, group in sorted(found, key=lambda f: f[0]) for directive in group
    ]
    if directives and not any(key == "SLOW" for key, _ in directives):
        directives.insert(0, ("SLOW", f"{ANSWER_SECONDS:g}"))
    return directives


def attached_files(message: str) -> list[str]:
    """The files the server's attachment note in ``message`` names, in its order."""
    note = _ATTACHED_NOTE.search(message)
    return _ATTACHED_FILE.findall(note.group(1)) if note else []


def pick(name: str, text: str) -> str | None:
    """The value ``text`` gives for ``name`` (``<name> is <value>``, ``<name>: <value>`` or
    ``<name> = <value>``), without quotes or the sentence's closing punctuation; None when it
    gives none."""
    match = re.search(re.escape(name) + r"\s*(?:\bis\b|:|=)\s*(\S+)", text, re.I)
    value = match.group(1).rstrip(".,;:!?").strip("\"'`") if match else ""
    return value or None
