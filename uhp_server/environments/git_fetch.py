"""A git repository fetched by the server for an import (Environments §3.1), under the same
egress policy the sandbox has (sandbox/egress.py), never from an arbitrary host.

- The URL is https only, with a host on the operator's allow-list (UHP_EGRESS_ALLOW_HOSTS),
  no credentials; every address the host resolves to passes gateway/url_policy.py's rules,
  and git is pinned to the address that was checked (`http.curloptResolve`), so a second
  lookup cannot swap in another.
- git runs with no system or user configuration, no template (so no hooks), no submodules,
  no redirects, no credential prompt, and `protocol.allow=never` with only https allowed (so
  no `file://`, `ext::` or ssh, in the URL or anywhere a repository could point).
- The clone is shallow (one commit of one branch or tag, no tags besides), bounded in time,
  and bounded in what it writes: git runs with RLIMIT_FSIZE at the import's byte limit, so no
  one file (the pack included) grows past it whenever the watch looks, and the watch stops the
  clone (`TooLarge`) once the folder holds more bytes, or more entries, than an import may:
  a repository of millions of empty files stops at the count, before the inodes run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import resource
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from uhp_server.environments.importing import ImportLimits
from uhp_server.environments.names import Invalid
from uhp_server.environments.source import TooLarge
from uhp_server.gateway.url_policy import UrlRefused, parse_url, pin_url
from uhp_server.sandbox.egress import EgressPolicy

MAX_REF = 200
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
WATCH_SECONDS = 0.1
MAX_ERROR = 400
# Entries a clone may make besides the files an import takes: its directories (as many again
# at most), and git's own (.git: its config, refs, a pack or up to fetch.unpackLimit loose
# objects and their directories).
GIT_OWN_ENTRIES = 1000


@dataclass(frozen=True)
class GitSource:
    url: str
    ref: str  # a branch or tag; "": the default branch


class GitUnavailable(Exception):
    """The repository could not be fetched (environment_unavailable); the reason in words."""


def checked_git(value: Any) -> GitSource:
    """The `git` object of an import; Invalid when it is not one this server fetches."""
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        raise Invalid("`git` must be an object with a `url`.")
    ref = value.get("ref") or ""
    if not isinstance(ref, str) or len(ref) > MAX_REF or (ref and not _REF.match(ref)):
        raise Invalid("`git.ref` must be a branch or tag name.")
    if ".." in ref or ref.endswith((".lock", "/")) or "//" in ref:
        raise Invalid("`git.ref` must be a branch or tag name.")
    url = value["url"].strip()
    if _has_credentials(url):
        raise Invalid(
            "`git.url` must not carry credentials: an import fetches a public repository "
            "(https, from a host on UHP_EGRESS_ALLOW_HOSTS); send a private project as a zip "
            "or tar body instead."
        )
    try:
        parts = parse_url(url)
    except UrlRefused as exc:
        raise Invalid(f"`git.url`: {exc}") from None
    if parts.scheme.lower() != "https":
        raise Invalid("`git.url` must be an https URL.")
    return GitSource(url, ref)


def _has_credentials(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return parts.username is not None or parts.password is not None
    except ValueError:
        return False  # parse_url says what is wrong with it


class GitFetcher:
    def __init__(self, egress: EgressPolicy, git: str, timeout_seconds: float) -> None:
        self.egress = egress
        self.git = git
        self.timeout = timeout_seconds

    async def fetch(self, source: GitSource, into: Path, limits: ImportLimits) -> Path:
        """Clones the repository into a new folder under `into`; the folder's path."""
        host = (parse_url(source.url).hostname or "").lower()
        if not self.egress.allows(host):
            raise Invalid(
                f"{host} is not on this server's egress allow-list (UHP_EGRESS_ALLOW_HOSTS); "
                "an operator adds the hosts imports may come from."
            )
        try:
            pinned = await pin_url(source.url, self.egress.allow_private)
        except UrlRefused as exc:
            raise Invalid(f"`git.url`: {str(exc).replace('The URL', 'The host')}") from None
        into.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=into, prefix="git-"))
        target = work / "repository"
        port = pin_url_port(source.url)
        resolve = f"{pinned.host}:{port}:{pinned.address}"
        try:
            await self._clone(source, target, resolve, Bounds.of(limits))
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return target

    async def _clone(self, source: GitSource, target: Path, resolve: str, bounds: Bounds) -> None:
        home = target.parent / "home"
        home.mkdir()
        args = [
            self.git,
            "-c", "protocol.allow=never",
            "-c", "protocol.https.allow=always",
            "-c", f"http.curloptResolve={resolve}",
            "-c", "http.followRedirects=false",
            "-c", "core.hooksPath=/dev/null",
            "-c", "core.symlinks=false",
            "-c", "submodule.recurse=false",
            "-c", "credential.helper=",
            "clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags",
            "--template=", "--no-recurse-submodules",
            *(["--branch", source.ref] if source.ref else []),
            "--", source.url, str(target),
        ]  # fmt: skip
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "/bin/false",
            "GIT_ALLOW_PROTOCOL": "https",
            "GIT_PROTOCOL_FROM_USER": "0",
            "GIT_LFS_SKIP_SMUDGE": "1",
        }
        process = await asyncio.create_subprocess_exec(
            *args,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            # A C call between fork and exec, so no lock of another thread is needed there.
            preexec_fn=functools.partial(
                resource.setrlimit, resource.RLIMIT_FSIZE, (bounds.bytes, bounds.bytes)
            ),
        )
        watch = asyncio.create_task(watch_folder(target, bounds))
        done = asyncio.create_task(process.communicate())
        try:
            finished, _ = await asyncio.wait(
                {watch, done}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if not done.done():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
                await done
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        if watch in finished:
            raise watch.result()
        if done not in finished:
            raise GitUnavailable(f"The repository was not fetched within {self.timeout:g} s.")
        _, stderr = done.result()
        said_all = stderr.decode("utf-8", "replace")
        if process.returncode == -signal.SIGXFSZ or f"signal {int(signal.SIGXFSZ)}" in said_all:
            raise bounds.too_many_bytes()  # a file (git's or a subprocess's) hit RLIMIT_FSIZE
        if process.returncode != 0:
            said = said_all.strip().splitlines()
            reason = said[-1][:MAX_ERROR] if said else f"git exited with {process.returncode}"
            raise GitUnavailable(f"The repository could not be fetched: {reason}")


def pin_url_port(url: str) -> int:
    return parse_url(url).port or 443


@dataclass(frozen=True)
class Bounds:
    """What a clone may write: bytes, and entries (files, directories, links) of any kind."""

    bytes: int
    entries: int
    limits: ImportLimits

    @classmethod
    def of(cls, limits: ImportLimits) -> Bounds:
        return cls(limits.max_bytes, 2 * limits.max_files + GIT_OWN_ENTRIES, limits)

    def too_many_bytes(self) -> TooLarge:
        return TooLarge(f"The repository holds more than {self.bytes} bytes.", self.bytes)

    def too_many_entries(self) -> TooLarge:
        return TooLarge(
            f"The repository holds more than {self.limits.max_files} files.",
            self.limits.max_bytes,
            self.limits.max_files,
        )


async def watch_folder(folder: Path, bounds: Bounds) -> TooLarge:
    """Returns (stopping the clone) the refusal once the folder holds more than the bounds
    allow; looks every WATCH_SECONDS (and no sooner than the last look took)."""
    while True:
        await asyncio.sleep(WATCH_SECONDS)
        over = await asyncio.to_thread(over_bounds, folder, bounds)
        if over is not None:
            return over


def over_bounds(folder: Path, bounds: Bounds) -> TooLarge | None:
    """The refusal when `folder` holds more bytes or entries than `bounds`, else None; the
    walk stops at the first entry past a bound (a folder of millions is not walked whole)."""
    entries = total = 0
    pending = [folder]
    while pending:
        try:
            scan = os.scandir(pending.pop())
        except OSError:  # not made yet, or removed while git works
            continue
        with scan:
            for entry in scan:
                entries += 1
                if entries > bounds.entries:
                    return bounds.too_many_entries()
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                else:
                    total += info.st_size  # as a sparse file will be counted (and copied)
                    if total > bounds.bytes:
                        return bounds.too_many_bytes()
    return None
