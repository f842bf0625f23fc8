"""ClaudeCodeBase: the Claude Code CLI (`@anthropic-ai/claude-code`) as a UHP harness base."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from harness_bases import events as ev
from harness_bases.base import Enforcement, HarnessBase, Invocation, Process, TurnSpec
from harness_bases.claude_code import command
from harness_bases.claude_code import install as installer
from harness_bases.claude_code.config import CONFIG_DIR, write_turn_files
from harness_bases.claude_code.driver import LiveTurn, drive_turn
from harness_bases.claude_code.safe_files import real_dir
from harness_bases.claude_code.skills import materialise_skills
from harness_bases.claude_code.transcripts import transcript_exists

log = logging.getLogger(__name__)


class ClaudeCodeBase(HarnessBase):
    name = "claude-code"
    label = "Claude Code"
    backend = "anthropic"
    cli_version = installer.CLI_VERSION
    # A deny rule in the CLI's settings removes a tool and refuses calls to it, and
    # --max-turns stops the CLI itself (see config.py and command.py).
    enforcement = Enforcement(disabled_tools="hard", max_step="native")
    mcp_transports = ("http", "sse")

    def __init__(self) -> None:
        # One base instance serves every session; live turns are keyed by their process.
        self._live: dict[int, LiveTurn] = {}

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

    async def drive(self, proc: Process, turn: TurnSpec) -> AsyncIterator[ev.AgentEvent]:
        live = LiveTurn(proc)
        self._live[id(proc)] = live
        # prepare() made the same check: a transcript that is gone means a fresh start.
        fresh_start = turn.native_session_id is not None and not _resumable(turn)
        try:
            async with contextlib.aclosing(drive_turn(live, turn.prompt, fresh_start)) as events:
                async for event in events:
                    yield event
        finally:
            if self._live.get(id(proc)) is live:
                del self._live[id(proc)]

    async def interrupt(self, proc: Process) -> bool:
        live = self._live.get(id(proc))
        if live is None:
            return False
        try:
            return await live.interrupt()
        except Exception:
            log.warning("claude_code_interrupt_failed", exc_info=True)
            return False


def _resumable(turn: TurnSpec) -> bool:
    return transcript_exists(turn.host_home, turn.native_session_id)
