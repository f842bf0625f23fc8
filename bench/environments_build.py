"""What does an environment's build cost, and what does a rebuild save
(uhp_server/environments/building/)?

Builds a small Python project (requirements.txt: six, python-dateutil) and a small Node
project (package.json: is-number, lodash) twice each as new versions of one
environment: the first build installs from the registries (through the egress proxy, with the
principal's cache empty), the rebuild of the unchanged project reuses the first version's
.venv / node_modules by hard links. In the local sandbox, and in the docker one when an
engine answers (--no-docker leaves it out). Prints each time and the rebuild/first ratio side
by side. Needs root (the agent's own uid), the registries on the egress allow-list and, behind
a TLS-inspecting proxy, its CA bundle (--ca). Usage:

    python bench/environments_build.py [--runs N] [--ca BUNDLE] [--no-docker] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from uhp_server.environments.builder import BuildRequest
from uhp_server.environments.building import SandboxBuilder
from uhp_server.sandbox.base import Sandbox
from uhp_server.sandbox.egress import EgressPolicy
from uhp_server.settings import Settings

REGISTRIES = "pypi.org,files.pythonhosted.org,registry.npmjs.org"
PROJECTS: dict[str, dict[str, str]] = {
    "python": {"requirements.txt": "six==1.16.0\npython-dateutil==2.9.0.post0\n"},
    "node": {
        "package.json": json.dumps(
            {
                "name": "bench",
                "version": "1.0.0",
                "dependencies": {"is-number": "7.0.0", "lodash": "4.17.21"},
            }
        )
    },
}


# A smoke run's projects: the same build steps (a venv and `pip install -r`, `npm install`, the
# rebuild's hard links, `finishing`) with nothing to fetch, so no registry is needed.
SMOKE_PROJECTS: dict[str, dict[str, str]] = {
    "python": {"requirements.txt": "\n"},
    "node": {"package.json": json.dumps({"name": "bench", "version": "1.0.0"})},
}


class Quiet:
    async def step(self, stage: str, log: str) -> None:
        return None


async def sandbox_of(kind: str, settings: Settings, egress: EgressPolicy) -> Sandbox:
    if kind == "local":
        from uhp_server.sandbox.local import LocalSandbox

        box: Sandbox = LocalSandbox.from_settings(settings)
        await box.open(None)
        return box
    from uhp_server.sandbox.docker.sandbox import DockerSandbox

    async def no_gateway(scope: Any, receive: Any, send: Any) -> None:
        return None

    box = DockerSandbox(settings.data_dir, egress=egress)  # builds its image when missing
    await box.open(no_gateway)
    return box


async def one_build(builder: SandboxBuilder, env: str, n: int, files: dict[str, str]) -> float:
    folder = builder.layout.version(env, n)
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    request = BuildRequest(env, "prin_bench", 5, n, folder, "/env/bench")
    started = time.perf_counter()
    await builder.build(request, Quiet())
    return time.perf_counter() - started


async def measure(
    kind: str, runs: int, ca: Path | None, projects: dict[str, dict[str, str]]
) -> dict[str, tuple[float, float]]:
    """Per project: the median first build and rebuild, in seconds."""
    times: dict[str, tuple[list[float], list[float]]] = {p: ([], []) for p in projects}
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="uhp-bench-build-", dir=Path.home()) as tmp:
            settings = Settings(
                data_dir=Path(tmp),
                egress_allow_hosts=REGISTRIES,
                egress_allow_private_hosts=True,
                environment_build_ca_bundle=ca,
            )
            egress = EgressPolicy.from_settings(REGISTRIES, True)
            box = await sandbox_of(kind, settings, egress)
            try:
                builder = SandboxBuilder(box, settings, egress)
                for project, files in projects.items():
                    env = f"env_{project}_{run}"
                    times[project][0].append(await one_build(builder, env, 1, files))
                    times[project][1].append(await one_build(builder, env, 2, files))
            finally:
                await box.close()
    return {p: (statistics.median(f), statistics.median(r)) for p, (f, r) in times.items()}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ca", type=Path, default=Path("/etc/ssl/certs/ca-certificates.crt"))
    parser.add_argument("--no-docker", action="store_true")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), runs=1)
    projects = SMOKE_PROJECTS if args.smoke else PROJECTS
    kinds = ["local"]
    why = "" if args.no_docker else _smoke.docker_absent()
    if why:
        _smoke.left_out(_smoke.DOCKER, "the docker sandbox's builds", why)
    elif not args.no_docker:
        kinds.append("docker")
    ca = args.ca if args.ca.is_file() else None
    print(f"median of {args.runs} runs, seconds")
    print(f"{'sandbox':8} {'project':8} {'first':>8} {'rebuild':>8} {'rebuild/first':>14}")
    for kind in kinds:
        mine = projects
        if args.smoke and len(kinds) > 1:
            # Each project kind once and each sandbox once is every path; a Python first build
            # alone takes 15-25 s here (the venv's pip), so not every pair of them.
            mine = {
                p: files for p, files in projects.items() if (p == "python") == (kind == "docker")
            }
        for project, (first, rebuild) in (await measure(kind, args.runs, ca, mine)).items():
            print(f"{kind:8} {project:8} {first:8.2f} {rebuild:8.2f} {rebuild / first:14.3f}")


if __name__ == "__main__":
    asyncio.run(main())
