"""The OpenHands CLI base: `openhands acp`, through a launcher, driven over the shared ACP
driver (harness_bases/acp)."""

from harness_bases.openhands.base import OpenHandsBase

__all__ = ["OpenHandsBase"]
