"""The Codex base: `codex app-server` driven over JSON-RPC on stdio."""

from harness_bases.codex.base import CodexBase

__all__ = ["CodexBase"]
