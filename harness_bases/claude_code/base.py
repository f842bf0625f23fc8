"""ClaudeCodeBase: the Claude Code CLI (`@anthropic-ai/claude-code`) as a UHP harness base."""

from __future__ import annotations

from pathlib import Path

from harness_bases.base import CliPin, Enforcement, HarnessBase, Invocation, Process, TurnSpec
from harness_bases.claude_code import command
from harness_bases.claude_code import install as installer
from harness_bases.claude_code.config import CONFIG_DIR, write_turn_files
from harness_bases.claude_code.driver import ClaudeCodeTurn
from harness_bases.claude_code.plugins import own_skills
from harness_bases.claude_code.skills import materialise_skills
from harness_bases.claude_code.transcripts import transcript_exists
from harness_bases.safe_files import real_dir
from harness_bases.turns import AgentTurn


class ClaudeCodeBase(HarnessBase):
    name = "claude-code"
    label = "Claude Code"
    backend = "anthropic"
    wire = "anthropic"
    cli_version = installer.CLI_VERSION
    cli_pins = (CliPin("npm", installer.PACKAGE, installer.CLI_VERSION),)
    state_dirs = (".claude",)
    # Transcripts (per project folder), prompt history, todos, file and shell snapshots, logs.
    conversation_paths = (
        ".claude/projects",
        ".claude/history.jsonl",
        ".claude/todos",
        ".claude/plans",
        ".claude/file-history",
        ".claude/shell-snapshots",
        ".claude/session-env",
        ".claude/debug",
    )
    runtime_packages = ()  # a native binary: the image's common tools are all it runs
    host_packages = ("nodejs", "npm")  # npm fetches it
    # A deny rule in the CLI's settings removes a tool and refuses calls to it, and
    # --max-turns stops the CLI itself (see config.py and command.py).
    enforcement = Enforcement(disabled_tools="hard", max_step="native")
    mcp_transports = ("http", "sse")
    # A plugin's skills go in the CLI's own plugin form, its MCP servers (stdio ones through
    # the launcher) in the MCP config with the harness's (plugins.py says why).
    stdio_mcp = True
    # With stream-json input the CLI waits for the next user message after a `result`: the
    # session's next turn is that message, in the same process.
    keeps_warm = True

    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return installer.installed_version(tools_dir)

    def prepare(self, turn: TurnSpec) -> Invocation:
        files = write_turn_files(turn)
        # A plugin's skills are in its Claude Code plugin (config.py wrote it): not here too.
        skills = own_skills(turn.plugins, turn.skills)
        materialise_skills(real_dir(turn.host_home, CONFIG_DIR), skills)
        resume = turn.native_session_id if _resumable(turn) else None
        return Invocation(
            argv=command.argv(turn, files, resume),
            env=command.environment(turn, files),
            cwd=turn.paths.workspace,
        )

    def start_turn(self, proc: Process, turn: TurnSpec) -> ClaudeCodeTurn:
        # prepare() made the same check: a transcript that is gone means a fresh start.
        fresh_start = turn.native_session_id is not None and not _resumable(turn)
        return ClaudeCodeTurn(proc, turn, fresh_start=fresh_start)

    def continue_turn(self, previous: AgentTurn, turn: TurnSpec) -> ClaudeCodeTurn | None:
        if not isinstance(previous, ClaudeCodeTurn) or not previous.stdin_open:
            return None
        return ClaudeCodeTurn(previous.proc, turn, fresh_start=False)


def _resumable(turn: TurnSpec) -> bool:
    return transcript_exists(turn.host_home, turn.native_session_id)
