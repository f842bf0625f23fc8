"""The OpenCode base: `opencode acp` driven over the shared ACP driver (harness_bases/acp)."""

from harness_bases.opencode.base import OpenCodeBase

__all__ = ["OpenCodeBase"]
