"""What differs for an agent the server knows nothing of: a tool's own name, where agents put
one (`_meta.toolName`, or under their own key: claude-code-acp's `_meta.claudeCode.toolName`),
else ACP's coarse `kind` (`execute`, `edit`, …), else its title, which is often the command
line itself; and a command's output where an agent puts it in its raw output (Codex's exec
events), not the raw output as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness_bases.acp.parser import AcpParser


def meta_tool_name(update: dict[str, Any]) -> str | None:
    meta = update.get("_meta")
    if not isinstance(meta, dict):
        return None
    candidates = [meta, *(value for value in meta.values() if isinstance(value, dict))]
    for found in (c.get("toolName") for c in candidates):
        if isinstance(found, str) and found:
            return found
    return None


# Where agents put a command's whole output in `rawOutput` when it has no `output` text:
# Codex's exec events (codex-acp) carry `aggregated_output` (stdout and stderr as the command
# wrote them), `formatted_output` and `stdout`, and its `exit_code`.
RAW_OUTPUT_KEYS = ("aggregated_output", "formatted_output", "stdout")


# What an agent's raw input says of the run rather than of the call (Codex's exec events:
# the process, the turn, the clock), left out of the call's arguments.
RUN_BOOKKEEPING = ("call_id", "process_id", "turn_id", "started_at_ms", "source", "parsed_cmd")


def raw_command_output(raw: Any) -> tuple[str, bool] | None:
    """A command's output and whether it exited 0, from a raw output that names them."""
    if not isinstance(raw, dict) or isinstance(raw.get("output"), str):
        return None
    named = [raw[key] for key in RAW_OUTPUT_KEYS if isinstance(raw.get(key), str)]
    if not named:
        return None
    # The first that holds anything: Codex leaves `aggregated_output` empty for a command
    # whose output it streamed, and gives it whole in `formatted_output`.
    text = next((said for said in named if said), "")
    return text, raw.get("exit_code") in (0, None)


@dataclass
class GenericAcpParser(AcpParser):
    def tool_name(self, update: dict[str, Any]) -> str:
        named = meta_tool_name(update) or update.get("kind")
        return str(named) if named else super().tool_name(update)

    def tool_input(self, raw: Any) -> dict[str, Any]:
        arguments = super().tool_input(raw)
        if "command" not in arguments:
            return arguments
        return {k: v for k, v in arguments.items() if k not in RUN_BOOKKEEPING}

    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        found = raw_command_output(update.get("rawOutput"))
        if found is None:
            return super().tool_result(update)
        text, exited_zero = found
        return text, exited_zero and update.get("status") == "completed"
