"""What a manager's registry says about a spec before any build (Environments §4,
`EnvironmentPackageCheck`): whether the name exists, its latest version, and whether an exact
pin is published. PyPI's JSON API, the npm registry's abbreviated metadata, and this server's
own apt lists (`apt-cache`).

A registry that cannot be asked (down, slow, unreachable from here) is no answer: `exists` is
None and `error` says why, never False. Each ask is bounded in time, and answers are kept
briefly per (manager, name), so a client checking as the owner types asks a registry once.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import httpx

from uhp_server.environments.names import DeclaredSpec, parse_spec

PYPI = "https://pypi.org/pypi/{name}/json"
NPM = "https://registry.npmjs.org/{name}"
NPM_ABBREVIATED = "application/vnd.npm.install-v1+json"
MAX_CACHED = 4096


@dataclass(frozen=True)
class PackageCheck:
    manager: str
    name: str
    spec: str
    exists: bool | None
    latest: str = ""
    version: str = ""  # the exact pin, when it is published
    error: str = ""


@dataclass(frozen=True)
class _Known:
    """What a registry said about a name: its versions, and the latest."""

    exists: bool | None
    latest: str = ""
    versions: frozenset[str] = frozenset()
    error: str = ""


class PackageChecker:
    def __init__(
        self, timeout_seconds: float, cache_seconds: float, apt_cache: str = "apt-cache"
    ) -> None:
        self.timeout = timeout_seconds
        self.cache_seconds = cache_seconds
        self.apt_cache = apt_cache
        self._cache: dict[tuple[str, str], tuple[float, _Known]] = {}
        self._http: httpx.AsyncClient | None = None

    async def check(self, manager: str, spec: str) -> PackageCheck:
        """Invalid (names.py) for a manager other than pip, npm or apt, or no spec of it."""
        declared = parse_spec(manager, spec)
        known = await self._known(declared)
        answer = PackageCheck(
            manager, declared.name, declared.spec, known.exists, known.latest, error=known.error
        )
        if known.exists and declared.version:
            if declared.version in known.versions:
                return replace(answer, version=declared.version)
            return replace(
                answer, error=f"{declared.name} has no published version {declared.version}."
            )
        if known.exists is False:
            return replace(answer, error=f"{declared.name} is not on the {_registry(manager)}.")
        return answer

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def _known(self, declared: DeclaredSpec) -> _Known:
        key = (declared.manager, declared.name.lower())
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
            return cached[1]
        try:
            known = await asyncio.wait_for(self._ask(declared), self.timeout)
        except TimeoutError:
            known = _Known(None, error=f"The {_registry(declared.manager)} did not answer in time.")
        if known.exists is not None:  # a failure to ask is asked again next time
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[key] = (time.monotonic(), known)
        return known

    async def _ask(self, declared: DeclaredSpec) -> _Known:
        if declared.manager == "apt":
            return await self._apt(declared.name)
        if declared.manager == "pip":
            url = PYPI.format(name=quote(declared.name, safe=""))
            return await self._registry(url, "the Python Package Index", _pypi_versions)
        url = NPM.format(name=quote(declared.name, safe="@"))
        return await self._registry(url, "npm registry", _npm_versions, NPM_ABBREVIATED)

    async def _registry(
        self,
        url: str,
        registry: str,
        read: Callable[[Any], tuple[str, list[str]]],
        accept: str = "application/json",
    ) -> _Known:
        try:
            response = await self._client().get(url, headers={"Accept": accept})
        except httpx.HTTPError as exc:
            return _Known(None, error=f"The {registry} could not be asked: {type(exc).__name__}.")
        if response.status_code == 404:
            return _Known(False)
        if response.status_code != 200:
            return _Known(None, error=f"The {registry} answered HTTP {response.status_code}.")
        try:
            latest, versions = read(response.json())
        except (ValueError, KeyError, TypeError, AttributeError):
            return _Known(None, error=f"The {registry}'s answer could not be read.")
        return _Known(True, latest, frozenset(versions))

    async def _apt(self, name: str) -> _Known:
        """From this server's apt lists: the candidate, and every version they know."""
        try:
            process = await asyncio.create_subprocess_exec(
                self.apt_cache, "madison", name,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        except OSError:
            return _Known(None, error="This server has no apt to ask.")
        try:
            out, _ = await process.communicate()
        except asyncio.CancelledError:
            process.kill()
            raise
        versions = [
            cells[1].strip()
            for line in out.decode("utf-8", "replace").splitlines()
            if len(cells := line.split("|")) >= 3 and cells[0].strip() == name
        ]
        if versions:
            return _Known(True, versions[0], frozenset(versions))
        if not await _apt_lists_present():
            return _Known(None, error="This server's apt lists are empty (apt-get update).")
        return _Known(False)

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            # The host's CA store, not certifi's: a TLS-inspecting proxy's CA is trusted there.
            context = ssl.create_default_context()
            self._http = httpx.AsyncClient(
                verify=context, timeout=self.timeout, follow_redirects=True
            )
        return self._http


def _pypi_versions(body: Any) -> tuple[str, list[str]]:
    releases = body["releases"]
    published = [version for version, files in releases.items() if files]
    return str(body["info"]["version"]), published


def _npm_versions(body: Any) -> tuple[str, list[str]]:
    return str(body["dist-tags"]["latest"]), list(body["versions"])


def _registry(manager: str) -> str:
    return {"pip": "Python Package Index", "npm": "npm registry", "apt": "apt lists"}[manager]


async def _apt_lists_present() -> bool:
    lists = "/var/lib/apt/lists"

    def present() -> bool:
        import os

        try:
            return any(
                name.endswith("_Packages") or "_Packages." in name for name in os.listdir(lists)
            )
        except OSError:
            return False

    return await asyncio.to_thread(present)
