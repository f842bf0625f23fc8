"""What an owner writes on an environment, checked (Environments §2): its name (the slug
derives from it), the packages it declares per manager as spec strings, and the Python it
builds with. A refusal is `Invalid`, said in words the client can act on.

A declared spec reaches an installer's command line, so only the plain forms are taken: a
name and a version or range, never an option (`-r`, `--index-url`), a URL, a path or an
environment marker. The project's own manifests (requirements.txt, package.json) say anything
richer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from uhp_server.environments.builder import Declared
from uhp_server.environments.layout import slug_of

MANAGERS = ("pip", "npm", "apt")
MAX_NAME = 200
MAX_TEXT = 4000  # description, entry
MAX_SPECS = 200  # per manager
MAX_SPEC = 200

# pip: a PEP 508 name, extras, then version clauses (==, >=, ~=, ...) separated by commas.
_PIP_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_PIP_CLAUSE = r"(?:===|==|!=|~=|>=|<=|>|<)\s*[A-Za-z0-9.*+!_-]+"
_PIP = re.compile(
    rf"^(?P<name>{_PIP_NAME})\s*(?:\[[A-Za-z0-9._,\s-]+\])?\s*"
    rf"(?P<clauses>{_PIP_CLAUSE}(?:\s*,\s*{_PIP_CLAUSE})*)?$"
)
_PIP_PIN = re.compile(r"^===?\s*(?P<version>[A-Za-z0-9.+!_-]+)$")
# npm: an optionally scoped name, then @ and a version, range or dist-tag (no URL, no path).
_NPM = re.compile(
    r"^(?P<name>(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*)"
    r"(?:@(?P<range>[A-Za-z0-9.^~<>=*|+ _-]+))?$"
)
_SEMVER = re.compile(r"^v?(?P<version>\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?)$")
# apt: a Debian package name, optionally =version.
_APT = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]+)(?:=(?P<version>[A-Za-z0-9.+:~-]+))?$")


class Invalid(ValueError):
    """What the owner wrote cannot be taken (environment_invalid); the message says why."""


@dataclass(frozen=True)
class DeclaredSpec:
    """One declared spec as written, and the name and exact version it names ("" for a
    range or none)."""

    manager: str
    spec: str
    name: str
    version: str


def checked_name(name: Any) -> tuple[str, str]:
    """The name and the slug it yields; Invalid for one that yields no path segment."""
    if not isinstance(name, str) or not name.strip():
        raise Invalid("An environment needs a name.")
    name = name.strip()
    if len(name) > MAX_NAME:
        raise Invalid(f"The name is longer than {MAX_NAME} characters.")
    if not name[0].isascii() or not name[0].isalnum():
        raise Invalid("The name must begin with a letter or a digit.")
    slug = slug_of(name)
    if not slug:
        raise Invalid("The name yields no path segment: use letters or digits.")
    return name, slug


def checked_text(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"`{field}` must be a string.")
    if len(value) > MAX_TEXT:
        raise Invalid(f"`{field}` is longer than {MAX_TEXT} characters.")
    return value


def parse_spec(manager: str, spec: object) -> DeclaredSpec:
    """The spec's name and exact version; Invalid for a manager other than pip, npm or apt,
    or a string that is not a plain spec of that manager."""
    if manager not in MANAGERS:
        raise Invalid(f"Unknown package manager {manager!r}: pip, npm or apt.")
    text = spec.strip() if isinstance(spec, str) else ""
    if not text or len(text) > MAX_SPEC:
        raise Invalid(f"A {manager} spec must be a non-empty string of at most {MAX_SPEC}.")
    if manager == "pip":
        return _pip(text)
    if manager == "npm":
        return _npm(text)
    return _apt(text)


def _pip(text: str) -> DeclaredSpec:
    found = _PIP.match(text)
    if found is None:
        raise Invalid(f"{text!r} is not a pip requirement such as `moviepy==2.1.1`.")
    clauses = found["clauses"] or ""
    pin = _PIP_PIN.match(clauses.strip())
    version = pin["version"] if pin and "*" not in pin["version"] else ""
    return DeclaredSpec("pip", text, found["name"], version)


def _npm(text: str) -> DeclaredSpec:
    found = _NPM.match(text)
    if found is None:
        raise Invalid(f"{text!r} is not an npm package spec such as `sharp@0.33.5`.")
    exact = _SEMVER.match((found["range"] or "").strip())
    return DeclaredSpec("npm", text, found["name"], exact["version"] if exact else "")


def _apt(text: str) -> DeclaredSpec:
    found = _APT.match(text)
    if found is None:
        raise Invalid(f"{text!r} is not a Debian package name such as `ffmpeg`.")
    return DeclaredSpec("apt", text, found["name"], found["version"] or "")


def checked_declared(value: Any) -> dict[str, list[str]]:
    """The declared specs as stored ({"pip": [...], ...}), from the body's object: each
    manager a list of spec strings (or the `{spec, ...}` objects an environment reads back
    with, so a client may send back what it read)."""
    if not isinstance(value, dict):
        raise Invalid("`packages` must be an object of pip, npm and apt lists.")
    stored: dict[str, list[str]] = {}
    for manager, specs in value.items():
        if manager not in MANAGERS:
            raise Invalid(f"Unknown package manager {manager!r}: pip, npm or apt.")
        if not isinstance(specs, list):
            raise Invalid(f"`packages.{manager}` must be a list of specs.")
        if len(specs) > MAX_SPECS:
            raise Invalid(f"At most {MAX_SPECS} {manager} specs.")
        written = [spec.get("spec") if isinstance(spec, dict) else spec for spec in specs]
        stored[manager] = [parse_spec(manager, spec).spec for spec in written]
    return {manager: stored[manager] for manager in MANAGERS if stored.get(manager)}


def declared_specs(stored: dict[str, Any]) -> dict[str, list[DeclaredSpec]]:
    """The stored specs, each with its name and version (what an environment reads back)."""
    return {
        manager: [parse_spec(manager, spec) for spec in stored.get(manager) or []]
        for manager in MANAGERS
    }


def as_declared(stored: dict[str, Any]) -> Declared:
    """What a build is asked to install beside the manifests."""
    return Declared(
        pip=tuple(stored.get("pip") or ()),
        npm=tuple(stored.get("npm") or ()),
        apt=tuple(stored.get("apt") or ()),
    )


def checked_runtime(value: Any, pythons: tuple[str, ...]) -> dict[str, str]:
    """`runtime` as stored: `python` one of the runtimes this server has, or none."""
    if not isinstance(value, dict):
        raise Invalid('`runtime` must be an object such as {"python": "3.12"}.')
    python = value.get("python") or ""
    if not isinstance(python, str):
        raise Invalid('`runtime.python` must be a string such as "3.12".')
    if python and python not in pythons:
        have = ", ".join(pythons) or "none"
        raise Invalid(
            f"Python {python} is not a runtime here (GET /v1/environments/runtimes: {have})."
        )
    return {"python": python} if python else {}
