"""What builds can use in this server's sandbox (GET /v1/environments/runtimes): the Python
minors and Node's major its system has, and the system's name. Found out once.

The local sandbox runs the host's own /usr (sandbox/local/sandbox.py binds it read-only), so
the host's files answer for it; the docker sandbox runs its runtime image, so a container of
that image answers (what `python3.X` and `node` it has, its os-release)."""

from __future__ import annotations

import re
import subprocess
from typing import Any

from uhp_server.environments.builder import Runtimes
from uhp_server.sandbox.base import Sandbox

SYSTEM_BINS = ("/usr/local/bin", "/usr/bin")
# Prints one line per fact: python3.X found, node's version, the OS's name.
PROBE = (
    'for dir in /usr/local/bin /usr/bin; do for exe in "$dir"/python3.*; do '
    '[ -x "$exe" ] && echo "python ${exe##*/}"; done; done; '
    'echo "node $(node --version 2>/dev/null)"; '
    '( . /usr/lib/os-release 2>/dev/null || . /etc/os-release; echo "os $PRETTY_NAME" )'
)
_PYTHON = re.compile(r"python(3\.\d+)$")
_NODE = re.compile(r"v?(\d+)\.")


def parse_probe(text: str) -> Runtimes:
    pythons: set[str] = set()
    node = os_name = ""
    for line in text.splitlines():
        kind, _, value = line.strip().partition(" ")
        if kind == "python" and (match := _PYTHON.fullmatch(value.strip())):
            pythons.add(match.group(1))
        elif kind == "node" and (match := _NODE.match(value.strip())):
            node = match.group(1)
        elif kind == "os":
            os_name = value.strip()
    ordered = sorted(pythons, key=lambda minor: tuple(int(p) for p in minor.split(".")))
    return Runtimes(python=tuple(ordered), node=node, os=os_name)


def probe(sandbox: Sandbox) -> Runtimes:
    """Blocks for a moment (a process, or a container of the image): call it once."""
    image = getattr(sandbox, "image", None)
    if sandbox.name == "docker" and isinstance(image, str):
        return parse_probe(_in_image(sandbox, image))
    return parse_probe(_on_host())


def _on_host() -> str:
    done = subprocess.run(
        ["/bin/sh", "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": ":".join((*SYSTEM_BINS, "/bin"))},
        check=False,
    )
    return done.stdout


def _in_image(sandbox: Any, image: str) -> str:
    """The probe in a container of the runtime image: no network, no capabilities, nobody's
    uid, removed once read."""
    engines = sandbox.engines.up_engines()
    if not engines:
        raise RuntimeError("no docker engine answers")
    api = engines[0].api
    host_config = api.create_host_config(
        network_mode="none",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        runtime=getattr(sandbox, "runtime", "") or None,
    )
    container = api.create_container(
        image, ["/bin/sh", "-c", PROBE], user="65534:65534", host_config=host_config
    )
    try:
        api.start(container["Id"])
        api.wait(container["Id"], timeout=60)
        return api.logs(container["Id"], stdout=True, stderr=False).decode(errors="replace")
    finally:
        api.remove_container(container["Id"], force=True)
