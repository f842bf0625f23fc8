"""What a base's `install` would run, recorded instead of run.

Every installer's command (npm, pip, uv) goes through `harness_bases.installing.
run_install_command`; a base whose pinned CLI already runs must run none of them. Asserting
that directly says what "idempotent" means, where a time limit would only hint at it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from harness_bases import installing
from harness_bases.base import HarnessBase


def install_commands(
    base: HarnessBase, tools_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> list[list[str]]:
    """Run `base.install(tools_dir)` with every install command recorded, not run: the
    commands it would have run."""
    recorded: list[list[str]] = []
    real = installing.run_install_command

    def record(command: list[str], **_: Any) -> None:
        recorded.append(command)

    # Modules that imported the function by name hold their own reference to it.
    for name, module in list(sys.modules.items()):
        if (
            name.startswith("harness_bases")
            and getattr(module, "run_install_command", None) is real
        ):
            monkeypatch.setattr(module, "run_install_command", record)
    base.install(tools_dir)
    return recorded
