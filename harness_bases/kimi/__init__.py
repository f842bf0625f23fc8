"""The Kimi CLI base: `kimi acp` driven over the shared ACP driver (harness_bases/acp), on a
private copy of a host CPython >= 3.12 (harness_bases/python_runtime.py)."""

from harness_bases.kimi.base import KimiBase

__all__ = ["KimiBase"]
