"""The mini-swe-agent base: its Python API driven by a small script inside the sandbox that
reports the turn as JSON lines (driver.py)."""

from harness_bases.mini_swe_agent.base import MiniSweAgentBase

__all__ = ["MiniSweAgentBase"]
