"""axe-core, the accessibility engine, for the browser tests: the pinned npm package, installed
once by the ordinary npm client into the test tools cache, and run inside a page.

It is evaluated through the DevTools protocol, which a page's CSP does not govern, so the page
is checked as it is served: its strict CSP on, no script of the test's in its DOM."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

AXE_VERSION = "4.14.1"
# Impacts that fail a test; "minor" and "moderate" are reported by axe but left to review.
FAILING_IMPACTS = ("serious", "critical")


def _cache() -> Path:
    configured = os.environ.get("UHP_TEST_TOOLS_DIR")
    root = Path(configured) if configured else Path.home() / ".cache" / "uhp-server" / "test-tools"
    return root / f"axe-core-{AXE_VERSION}"


def axe_source() -> str:
    """axe.min.js of the pinned version, installed on first use."""
    folder = _cache()
    script = folder / "node_modules" / "axe-core" / "axe.min.js"
    if not script.is_file():
        npm = shutil.which("npm")
        if npm is None:
            message = "npm is not installed: the accessibility check needs it for axe-core"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip("ACCESSIBILITY CHECK NOT RUN. " + message)
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(folder),
                f"axe-core@{AXE_VERSION}",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return script.read_text()


def serious_violations(page: Any) -> list[str]:
    """axe's serious and critical violations on the page as it stands, one line each (the
    rule, its help text, the first offending elements): empty when there are none."""
    page.evaluate(axe_source())
    result = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at "
        + ", ".join(str(node["target"]) for node in v["nodes"][:3])
        for v in result
        if v.get("impact") in FAILING_IMPACTS
    ]
