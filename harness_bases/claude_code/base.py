"""ClaudeCodeBase: the Claude Code CLI (`@anthropic-ai/claude-code`) as a UHP harness base."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from harness_bases import events as ev
from harness_bases.base import Enforcement, HarnessBase, Invocation, Process, TurnSpec
from harness_bases.claude_code import command
from harness_bases.claude_code import install as installer
from harness_bases.claude_code.config import CONFIG_DIR, write_turn_files
from harness_bases.claude_code.driver import LiveTurn, drive_turn
from harness_bases.claude_code.skills import materialise_skills
from harness_bases.claude_code.transcripts import transcript_exists
from harness_bases.live_turns import LiveTurns
from harness_bases.safe_files import real_dir


class ClaudeCodeBase(HarnessBase):
    name = "claude-code"
    label = "Claude Code"
    backend = "anthropic"
    wire = "anthropic"
    cli_version = installer.CLI_VERSION
    # A deny rule in the CLI's settings removes a tool and refuses calls to it, and
    # --max-turns stops the CLI itself (see config.py and command.py).
    enforcement = Enforcement(disabled_tools="hard", max_step="native")
    mcp_transports = ("http", "sse")

    def __init__(self) -> None:
        self._live = LiveTurns[LiveTurn]("claude_code")

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        files = write_turn_files(turn)
        materialise_skills(real_dir(turn.host_home, CONFIG_DIR), turn.skills)
        resume = turn.native_session_id if _resumable(turn) else None
        return Invocation(
            argv=command.argv(turn, files, resume),
            env=command.environment(turn, files),
            cwd=turn.paths.workspace,
        )

    def drive(self, proc: Process, turn: TurnSpec) -> AsyncIterator[ev.AgentEvent]:
        live = LiveTurn(proc)
        # prepare() made the same check: a transcript that is gone means a fresh start.
        fresh_start = turn.native_session_id is not None and not _resumable(turn)
        return self._live.follow(proc, live, drive_turn(live, turn.prompt, fresh_start))

    async def interrupt(self, proc: Process) -> bool:
        return await self._live.interrupt(proc)


def _resumable(turn: TurnSpec) -> bool:
    return transcript_exists(turn.host_home, turn.native_session_id)
