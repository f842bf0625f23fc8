"""A Debian base image without a registry: debootstrap a minbase bookworm from the host's own
apt mirror and import it into the engine (needs root and the `debootstrap` package)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.errors

SUITE = "bookworm"
TAG = f"uhp-debian:{SUITE}"
LABEL = "uhp.image.bootstrap"  # value: suite and mirror it was made from
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBOOTSTRAP_TIMEOUT = 900

_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))


class BootstrapError(RuntimeError):
    pass


def debian_mirror() -> str:
    """The Debian archive this host installs from (not its security archive)."""
    texts: list[str] = []
    for source in _SOURCES:
        files = sorted(source.glob("*")) if source.is_dir() else [source]
        texts += [f.read_text(errors="replace") for f in files if f.is_file()]
    for text in texts:
        for uri in re.findall(r"(?:^deb\s+(?:\[[^\]]*\]\s+)?|^URIs:\s*)(\S+)", text, re.M):
            if uri.startswith("http") and uri.rstrip("/").endswith("/debian"):
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def base_image(api: Any, say: Callable[[str], None]) -> str:
    """TAG, bootstrapped now unless the engine already has it."""
    try:
        api.inspect_image(TAG)
        return TAG
    except docker.errors.ImageNotFound:
        pass
    program = shutil.which("debootstrap")
    if program is None:
        raise BootstrapError("debootstrap is not installed (apt-get install -y debootstrap)")
    if os.geteuid() != 0:
        raise BootstrapError("bootstrapping a base image needs root (debootstrap)")
    mirror = debian_mirror()
    say(f"bootstrapping {TAG} from {mirror} (about a minute) ...")
    with tempfile.TemporaryDirectory(prefix="uhp-bootstrap-") as scratch:
        root = Path(scratch) / "root"
        result = subprocess.run(
            [program, "--variant=minbase", SUITE, str(root), mirror],
            capture_output=True,
            text=True,
            timeout=DEBOOTSTRAP_TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            raise BootstrapError(f"debootstrap failed: {(result.stderr or result.stdout)[-2000:]}")
        archive = Path(scratch) / "root.tar"
        # GNU tar keeps device nodes, hard links and owners exactly as debootstrap made them.
        packed = subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(archive), "."],
            capture_output=True,
            text=True,
            check=False,
        )
        if packed.returncode != 0:
            raise BootstrapError(f"packing the bootstrapped root failed: {packed.stderr[-2000:]}")
        repository, tag = TAG.split(":")
        api.import_image_from_file(
            str(archive),
            repository=repository,
            tag=tag,
            changes=[f'LABEL {LABEL}="{SUITE} {mirror}"', 'CMD ["/bin/bash"]'],
        )
    say(f"imported {TAG}")
    return TAG
