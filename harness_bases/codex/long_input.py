"""A prompt longer than Codex takes in one `turn/start`, delivered through a file.

app-server refuses a turn whose text input is over 1 Mi characters (`input_too_large`, the
pinned CLI's MAX_USER_INPUT_TEXT_CHARS), whichever door the prompt came through. Such a
prompt is written whole to a file in the agent's home (outside the workspace, so it is never
an artifact), and the turn's text is its beginning followed by a note naming that file: the
agent reads the opening (where a request usually says what it wants) at once and the rest
with its own tools.
"""

from __future__ import annotations

from harness_bases.base import TurnSpec
from harness_bases.safe_files import real_dir, write_file

MAX_INPUT_CHARS = 1 << 20  # what `turn/start` accepts, counted in characters
HEAD_CHARS = 64 * 1024  # the part of a long prompt the turn's text still carries
INPUT_DIR = ".uhp/input"
INPUT_FILE = "message.md"


def fits(prompt: str) -> bool:
    return len(prompt) <= MAX_INPUT_CHARS


def turn_text(turn: TurnSpec) -> str:
    """The text to send as the turn's input; for a long prompt, writes its file first
    (host disk work: call it off the event loop)."""
    if fits(turn.prompt):
        return turn.prompt
    folder = real_dir(turn.host_home, INPUT_DIR)  # never a link the agent left
    write_file(folder / INPUT_FILE, turn.prompt.encode("utf-8", errors="replace"), 0o644)
    inside = f"{turn.paths.home}/{INPUT_DIR}/{INPUT_FILE}"
    return (
        f"{turn.prompt[:HEAD_CHARS]}\n\n"
        f"[The user's message is {len(turn.prompt):,} characters long, more than fits here: "
        f"the part above is only its beginning. Its full text is in the file {inside}; read "
        "the whole file before you answer.]"
    )
