"""How OpenCode's ACP output differs from plain ACP: what harness_bases/acp/opencode_family.py
says for the whole family (a command's exit code, a provider's failure)."""

from __future__ import annotations

from dataclasses import dataclass

from harness_bases.acp.opencode_family import PROVIDER_FAILED, OpenCodeFamilyParser

__all__ = ["PROVIDER_FAILED", "OpenCodeParser"]


@dataclass
class OpenCodeParser(OpenCodeFamilyParser):
    pass
