"""The argv and environment of one Claude Code turn (flags checked against `--help` of the
pinned version; tests run them against the live CLI)."""

from __future__ import annotations

from harness_bases.base import SYSTEM_PATH, TurnSpec
from harness_bases.claude_code import install as installer
from harness_bases.claude_code.config import TOKEN_ENV, TurnFiles, mcp_env

# Retries of a failed model call. The gateway is local: the CLI's default (10, with
# back-off) turns one upstream error into minutes of silence.
MAX_RETRIES = 2


def max_turns(max_step: int) -> int:
    """`--max-turns` for a budget of `max_step` tool-call rounds. Claude Code counts model
    responses, and stops (`error_max_turns`) after the last allowed one's tool calls ran;
    the answer that follows the last allowed step is one more response."""
    return max_step + 1


def argv(turn: TurnSpec, files: TurnFiles, resume: str | None) -> list[str]:
    args = [
        installer.binary_path(turn.paths.tools, turn.host_tools),
        "--print",
        "--input-format=stream-json",
        "--output-format=stream-json",
        "--verbose",  # stream-json output needs it
        "--include-partial-messages",  # real text and thinking deltas
        # Our sandbox is the sandbox; nothing asks a person (who is not there).
        "--dangerously-skip-permissions",
        # With a door that takes questions, we are the host that answers AskUserQuestion
        # (harness_bases/claude_code/questions.py); otherwise nobody answers anything.
        *(
            ["--permission-prompts=host", "--permission-prompt-tool=stdio"]
            if turn.ask_user
            else ["--permission-prompts=none"]
        ),
        f"--model={turn.model}",
        "--system-prompt-snapshot=off",
        f"--mcp-config={files.mcp_config}",
        "--strict-mcp-config",
    ]
    if files.plugin_dir:
        args.append(f"--plugin-dir={files.plugin_dir}")
    if files.system_prompt:
        args.append(f"--append-system-prompt-file={files.system_prompt}")
    if turn.max_step is not None:
        args.append(f"--max-turns={max_turns(turn.max_step)}")
    if resume:
        args.append(f"--resume={resume}")
    return args


def environment(turn: TurnSpec, files: TurnFiles) -> dict[str, str]:
    """Built from nothing: what the CLI needs, the turn's token, and no way out but the
    gateway. (No inherited CLAUDECODE / CLAUDE_CODE_* can reach it: there is none.)"""
    return {
        "PATH": SYSTEM_PATH,
        "HOME": turn.paths.home,
        "CLAUDE_CONFIG_DIR": files.config_dir,
        # The CLI appends /v1/messages itself.
        "ANTHROPIC_BASE_URL": turn.gateway_url.rstrip("/"),
        TOKEN_ENV: turn.gateway_token,  # exactly one credential variable
        **mcp_env(turn.mcp_servers),
        # Every tool command goes through this; it keeps the credentials above out of the
        # command's environment (the token in the CLI's own /proc environ stays readable to
        # the same uid: it is bound to this turn's sandbox and dies with the turn).
        "CLAUDE_CODE_SHELL_PREFIX": installer.shell_prefix_path(turn.paths.tools),
        # As root (the local sandbox's uid 0, capabilities dropped) the CLI refuses
        # --dangerously-skip-permissions unless told it is in a sandbox.
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_RETRIES": str(MAX_RETRIES),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
