"""The turn's standing instructions (system prompt, disabled tools, skills) for a Codex thread.

Codex puts `developerInstructions` into a thread's history once, when the thread starts;
on `thread/resume` the parameter is ignored. So that a later task's instructions (say, a
newly disabled tool) still reach the model, we remember per thread what it was last told,
in the session's CODEX_HOME, and inject an update into the history when it changed.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness_bases.base import TurnSpec
from harness_bases.codex.skills import skill_folder
from harness_bases.safe_files import real_dir, write_file

UPDATE_PREFIX = (
    "Instructions update: the task instructions given earlier in this conversation no longer apply."
)


def developer_instructions(turn: TurnSpec) -> str | None:
    """The system prompt plus the disabled tools, as standing developer instructions."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.disabled_tools:
        parts.append(f"Do not use these tools: {', '.join(turn.disabled_tools)}.")
    if turn.skills:
        parts.append(skills_note(turn))
    return "\n\n".join(parts) or None


def skills_note(turn: TurnSpec) -> str:
    """Names every skill folder, so the agent knows of each one (Codex itself lists only
    skills whose SKILL.md has front matter)."""
    codex_home = f"{turn.paths.home}/.codex"
    lines = [
        "Skills are installed for you: each is a folder of instructions and resources for "
        "one kind of task. When a task matches a skill, read its SKILL.md first and use the "
        "files beside it as it says."
    ]
    lines += [f"- {s.name}: {skill_folder(codex_home, s.name)}/SKILL.md" for s in turn.skills]
    return "\n".join(lines)


def update_message(previous: str | None, current: str | None) -> str | None:
    """The developer message to inject into a resumed thread, or None if nothing changed."""
    if (previous or "") == (current or ""):
        return None
    return f"{UPDATE_PREFIX} Follow these instead:\n\n{current}" if current else UPDATE_PREFIX


def developer_item(text: str) -> dict[str, object]:
    """A raw Responses API developer message, as `thread/inject_items` takes it."""
    return {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def _record_path(codex_home: Path, thread_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", thread_id)
    return codex_home / "uhp-instructions" / f"{safe}.txt"


def recorded(codex_home: Path, thread_id: str) -> str | None:
    """What the thread was last told; None when unknown (then it is told again)."""
    path = _record_path(codex_home, thread_id)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def record(codex_home: Path, thread_id: str, text: str | None) -> None:
    path = _record_path(codex_home, thread_id)
    real_dir(codex_home, path.parent.name)
    write_file(path, (text or "").encode("utf-8"))


def forget(codex_home: Path, thread_id: str) -> None:
    """The thread compacted its history, and an injected update with it: unknown again."""
    _record_path(codex_home, thread_id).unlink(missing_ok=True)
