"""The `pip install` lines of README.md and docs/, and whether what they install is what the
tests run with.

A reader's install line resolves to the newest release it allows; the tests run with the
version the project's own requirement (pyproject.toml) picked. The two are the same release
only when the line allows the installed version and carries every bound of the project's that
keeps newer releases out: `pip install mcp` installs mcp 2.x while the tests run 1.x under
`mcp>=1.26,<2`, and a page's example then fails for the reader alone (issue 33).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name

from tests.support.doc_examples import REPO

# `pip install …` up to the end of the inline code span or the line.
INSTALL = re.compile(r"(?P<pip>[\w./~-]*pip) install (?P<args>[^`\n]*)")
# Options whose next word is theirs, not a requirement.
_WITH_VALUE = {"-e", "--editable", "-r", "--requirement", "-c", "--constraint", "-i", "--index-url"}
# Clauses that keep newer releases out: the newest release a line allows depends on them.
_UPPER = {"<", "<=", "==", "~=", "==="}
SERVER_PIP = ".venv/bin/pip"  # the server's own venv: what goes in it runs beside the tests


@dataclass(frozen=True)
class DocRequirement:
    where: str  # page:line
    pip: str  # the pip the line runs (`.venv/bin/pip` is the server's venv)
    requirement: Requirement


def doc_requirements(page: Path) -> list[DocRequirement]:
    """Every named requirement a `pip install` of `page` installs (paths, options, `-e .`,
    `-r file` and placeholders such as `<spec>` are not names of a release)."""
    found = []
    name = page.relative_to(REPO) if page.is_relative_to(REPO) else page
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        for match in INSTALL.finditer(line):
            for word in _words(match["args"]):
                requirement = _requirement(word)
                if requirement is not None:
                    found.append(DocRequirement(f"{name}:{number}", match["pip"], requirement))
    return found


def _words(args: str) -> list[str]:
    """The install's arguments, up to where the shell command ends."""
    args = re.split(r"&&|\|\||[;|#)]", args, maxsplit=1)[0]
    try:
        words = shlex.split(args)
    except ValueError:  # an unbalanced quote in prose
        words = args.split()
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in _WITH_VALUE:
            skip = True
        elif not word.startswith("-"):
            kept.append(word)
    return kept


def _requirement(word: str) -> Requirement | None:
    if word.startswith((".", "/", "~")) or "/" in word:
        return None  # a path or URL: the project itself, a checkout
    try:
        return Requirement(word)
    except InvalidRequirement:
        return None  # a placeholder (`<spec>…`)


def project_requirements() -> dict[str, SpecifierSet]:
    """What pyproject.toml asks of each distribution (dependencies and every extra), by its
    canonical name; one named twice has both specifiers."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = [*project.get("dependencies", [])]
    for extra in project.get("optional-dependencies", {}).values():
        lines.extend(extra)
    wanted: dict[str, SpecifierSet] = {}
    for line in lines:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        wanted[name] = wanted.get(name, SpecifierSet()) & requirement.specifier
    return wanted


def upper_bounds(specifiers: SpecifierSet) -> set[Specifier]:
    return {s for s in specifiers if s.operator in _UPPER}


def install_problems(page: Path) -> list[str]:
    """Why each install line of `page` would give a reader another release than the tests
    run with; [] when none would. A distribution not installed here is another venv's (a
    tool the docs compare with), unless the line installs it into the server's venv."""
    wanted = project_requirements()
    problems = []
    for line in doc_requirements(page):
        requirement = line.requirement
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            if line.pip == SERVER_PIP:
                problems.append(f"{line.where}: {requirement} is not installed with the tests")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            problems.append(f"{line.where}: {requirement} excludes the tested {installed}")
        project = wanted.get(canonicalize_name(requirement.name), SpecifierSet())
        missing = upper_bounds(project) - set(requirement.specifier)
        if missing:
            bounds = ",".join(sorted(str(s) for s in missing))
            problems.append(
                f"{line.where}: {requirement} lacks pyproject.toml's {bounds}, so it installs "
                f"a newer release than the tested {installed}"
            )
    return problems
