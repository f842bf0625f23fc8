"""The Kilo Code CLI base: `kilo acp` driven over the shared ACP driver (harness_bases/acp)."""

from harness_bases.kilo.base import KiloBase

__all__ = ["KiloBase"]
