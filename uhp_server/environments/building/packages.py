"""What a build installed, as each manager reports it: pip's `pip list --format json` from
the virtual environment, npm's own lockfile of node_modules (node_modules/.package-lock.json,
every package it placed), and the control files of the Debian packages unpacked under apt/.
The build's agent could write any of them: each is read without following links, capped
(host_files.py), and only what parses is taken."""

from __future__ import annotations

import json
from pathlib import Path

from uhp_server.environments.builder import Package
from uhp_server.environments.building.host_files import read_regular
from uhp_server.environments.building.steps import NODE_MODULES

# pip's own tools in every virtual environment: not what the project installed.
_VENV_TOOLING = frozenset({"pip", "setuptools", "wheel"})


def _order(package: Package) -> tuple[str, str]:
    return package.name.lower(), package.version


def pip_packages(report: bytes | None) -> list[Package]:
    """`pip list --format json`'s answer (None: no virtual environment)."""
    try:
        listed = json.loads(report or b"")
    except ValueError:
        return []
    if not isinstance(listed, list):
        return []
    return sorted(
        (
            Package("pip", str(entry["name"]), str(entry["version"]))
            for entry in listed
            if isinstance(entry, dict)
            and "name" in entry
            and str(entry["name"]).lower() not in _VENV_TOOLING
        ),
        key=_order,
    )


def npm_packages(folder: Path) -> list[Package]:
    """npm's hidden lockfile: a key per placed package (node_modules/a/node_modules/b)."""
    try:
        lock = json.loads(read_regular(folder, NODE_MODULES, ".package-lock.json") or b"")
    except ValueError:
        return []
    if not isinstance(lock, dict) or not isinstance(lock.get("packages") or {}, dict):
        return []
    found: set[Package] = set()
    for where, entry in (lock.get("packages") or {}).items():
        if not isinstance(entry, dict) or "version" not in entry or entry.get("link"):
            continue
        name = entry.get("name") or where.rpartition("node_modules/")[2]
        found.add(Package("npm", str(name), str(entry["version"])))
    return sorted(found, key=_order)


def apt_packages(report: bytes | None) -> list[Package]:
    """Lines of `dpkg-deb --show` of each unpacked .deb: its control file's name and version,
    tab-separated."""
    lines = (report or b"").decode(errors="replace").splitlines()
    found = {}
    for line in lines:
        name, _, version = line.strip().partition("\t")
        if name and version:
            found[name] = Package("apt", name, version)
    return sorted(found.values(), key=_order)
