"""Harness bases: one sub-package per CLI agent. `registry()` maps base names to instances,
found through the `uhp_server.bases` entry points (see docs/extending.md)."""

from __future__ import annotations

from harness_bases.base import HarnessBase
from harness_bases.registry import ENTRY_POINT_GROUP, registry

__all__ = ["ENTRY_POINT_GROUP", "HarnessBase", "registry"]
