"""Harness bases: one sub-package per CLI agent. `registry()` maps base names to instances."""

from __future__ import annotations

from harness_bases.base import HarnessBase


def registry() -> dict[str, HarnessBase]:
    from harness_bases.claude_code import ClaudeCodeBase
    from harness_bases.codex import CodexBase
    from harness_bases.hermes import HermesBase
    from harness_bases.pi import PiBase

    bases: list[HarnessBase] = [CodexBase(), HermesBase(), ClaudeCodeBase(), PiBase()]
    return {base.name: base for base in bases}
