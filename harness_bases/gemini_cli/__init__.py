"""The Gemini CLI base: `gemini --acp` on the shared ACP driver, on a pinned node."""

from harness_bases.gemini_cli.base import GeminiCliBase

__all__ = ["GeminiCliBase"]
