"""The Cline CLI base: `cline --acp` driven over the shared ACP driver (harness_bases/acp)."""

from harness_bases.cline.base import ClineBase

__all__ = ["ClineBase"]
