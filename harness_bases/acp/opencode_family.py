"""What OpenCode and the agents built from it (Kilo Code CLI) share on top of plain ACP.

Their ACP servers are the same code: a shell command's raw output carries its exit code in
`metadata.exit` (a command that exited non-zero is a failed call, as it is for the other
bases), and a model call that failed answers the prompt with a JSON-RPC error whose
`data.errorName` is `APIError`: the provider's failure, with the provider's message. Both run
the model's shell commands with `$SHELL`: `SCRUBBED_SHELL` is bash without this turn's `UHP_`
variables (the gateway token), installed under each CLI's tools folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases.acp.parser import PROMPT_ERROR, AcpParser
from harness_bases.messages import safe_message

PROVIDER_FAILED = "The model provider failed the request."
_INTERNAL = "Internal error: "
# Installed named `bash`: these agents pick how to call a shell by its name.
SCRUBBED_SHELL = Path(__file__).with_name("scrubbed_shell.sh")


@dataclass
class OpenCodeFamilyParser(AcpParser):
    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        text, ok = super().tool_result(update)
        raw = update.get("rawOutput")
        metadata = raw.get("metadata") if isinstance(raw, dict) else None
        exit_code = metadata.get("exit") if isinstance(metadata, dict) else None
        return text, ok and exit_code in (0, None)

    def prompt_error(self, error: dict[str, Any]) -> list[ev.AgentEvent]:
        data = error.get("data")
        if isinstance(data, dict) and data.get("errorName") == "APIError":
            message = str(error.get("message") or "").removeprefix(_INTERNAL)
            return [ev.TurnFailed(safe_message(message, PROVIDER_FAILED), "provider_error")]
        return [ev.TurnFailed(PROMPT_ERROR, "harness_error")]
