"""The Claude Code base: `claude -p` in stream-json mode, through the Anthropic gateway."""

from harness_bases.claude_code.base import ClaudeCodeBase

__all__ = ["ClaudeCodeBase"]
