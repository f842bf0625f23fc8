"""Issue 33 §7: the Docker Compose deployment passes through the settings README tells a
newcomer to set (UHP_PUBLIC_BASE_URL and UHP_METRICS_TOKEN behind a proxy or on an exposed
port were missing), and docs/docker.md names exactly what it passes. Fast: reads files."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
# README's configuration table names these, and the deployment has its reason not to pass them.
NOT_PASSED = {
    "UHP_PROVIDERS_FILE": "a file path: the container sees it only once mounted",
}
ROW = re.compile(r"^\| (`[A-Z0-9_]+`(?:, `[A-Z0-9_]+`)*) \|", re.M)
NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def readme_settings() -> set[str]:
    """The variables of README's configuration table (a row's first cell, one or several)."""
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("## Configuration") :]
    table = table[: table.index("\n\n", table.index("| Variable |"))]
    return {name for cell in ROW.findall(table) for name in NAME.findall(cell)}


def passed_through() -> set[str]:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    return set(compose["services"]["server"]["environment"])


def set_by_the_image() -> set[str]:
    dockerfile = (REPO / "Dockerfile").read_text()
    env = dockerfile[dockerfile.index("\nENV ") :].split("\nEXPOSE")[0]
    return set(re.findall(r"\b(UHP_[A-Z_]+)=", env))


def test_every_readme_setting_reaches_the_server_in_compose() -> None:
    readme = readme_settings()
    assert {"UHP_PUBLIC_BASE_URL", "UHP_METRICS_TOKEN", "OPENAI_API_KEY"} <= readme  # parsed
    missing = readme - passed_through() - set_by_the_image() - set(NOT_PASSED)
    assert missing == set(), f"README tells a newcomer to set {missing}; compose.yaml drops them"


def test_docker_md_names_what_compose_passes_through() -> None:
    page = (REPO / "docs" / "docker.md").read_text()
    section = page[page.index("## Running it with Docker Compose") :]
    sentence = section[section.index("It passes through") :].split("\n\n")[0]
    named = set(NAME.findall(sentence))
    assert passed_through() <= named, passed_through() - named
    assert set_by_the_image() <= named  # said to be the image's own
    assert set(NOT_PASSED) <= named  # and why these are not passed
