"""The Pi base: `pi --mode rpc` (JSON commands and events on stdio) on a pinned node."""

from harness_bases.pi.base import PiBase

__all__ = ["PiBase"]
