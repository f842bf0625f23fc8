"""Shell probes an agent's tool command runs, carried so that every CLI runs them as written."""

from __future__ import annotations

import base64


def as_one_command(script: str) -> str:
    """`script` as one tool command with no `$(…)`, backticks or quotes in it: Gemini CLI
    refuses a command with a substitution before it runs, and what a probe tests is the
    sandbox, not a CLI's command filter. The script travels base64-encoded; bash runs it."""
    encoded = base64.b64encode(script.encode()).decode()
    return f"echo {encoded} | base64 -d | bash"
