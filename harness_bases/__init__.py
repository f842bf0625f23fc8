"""Harness bases: one sub-package per CLI agent. `registry()` maps base names to instances."""

from __future__ import annotations

from harness_bases.base import HarnessBase


def registry() -> dict[str, HarnessBase]:
    from harness_bases.codex import CodexBase

    bases: list[HarnessBase] = [CodexBase()]
    return {base.name: base for base in bases}
