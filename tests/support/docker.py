"""Docker for the tests: a live engine and the runtime image, or a loud skip."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import pytest


@functools.cache
def _engine() -> tuple[Any, str]:
    """(api client, "") when an engine answers, else (None, why not)."""
    try:
        import docker

        api = docker.from_env(timeout=30).api
        api.ping()
        return api, ""
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


# The docker sandbox's runtime under test: UHP_TEST_DOCKER_RUNTIME=runsc runs the docker
# tests in gVisor (scripts/test.sh has a pass of its own for it); empty, the engine's default.
TEST_DOCKER_RUNTIME = os.environ.get("UHP_TEST_DOCKER_RUNTIME", "")


def engine_or_skip() -> Any:
    api, why = _engine()
    if api is None:
        message = (
            "\n*** DOCKER TESTS SKIPPED: no Docker engine answers "
            f"({why}). scripts/test.sh installs and starts one. ***\n"
        )
        print(message, file=sys.stderr)
        pytest.skip(message)
    if TEST_DOCKER_RUNTIME:
        runtime_or_skip(api, TEST_DOCKER_RUNTIME)
    return api


def runtime_or_skip(api: Any, runtime: str) -> None:
    """Skip, loudly, when the engine has no runtime `runtime` (never a silent pass)."""
    from uhp_server.sandbox.docker.runtimes import engine_runtimes

    have = engine_runtimes(api)
    if runtime not in have:
        message = (
            f"\n*** DOCKER TESTS SKIPPED: the engine has no runtime {runtime!r} (it has "
            f"{', '.join(sorted(have))}). bash scripts/docker-engine.sh installs gVisor and "
            "registers it as runsc. ***\n"
        )
        print(message, file=sys.stderr)
        pytest.skip(message)


@functools.cache
def _runtime_image() -> str:
    """The image a server enabling only the base under test runs (its packages are part of
    the tag), built here so the server does not build it while the test waits."""
    from harness_bases import registry
    from tests.conftest import TEST_BASE
    from uhp_server.sandbox.docker import images

    api, _ = _engine()
    packages = images.runtime_packages([registry()[TEST_BASE]])
    return images.build_runtime(
        api, base_image="debian:bookworm-slim", packages=packages, say=lambda _text: None
    )


def runtime_image_or_skip() -> str:
    """The runtime image this code runs (built when missing; scripts/test.sh builds it)."""
    engine_or_skip()
    return _runtime_image()


def server_id(data_dir: Path) -> str:
    from uhp_server.sandbox.docker.reaper import ID_FILE

    return (data_dir / ID_FILE).read_text().strip()


def containers_of(
    data_dir: Path, *, running_only: bool = False, ready_slots: bool = False
) -> list[dict[str, Any]]:
    """Every container (or only running ones) of the server whose data dir this is: its
    turns', and with `ready_slots` also its ready pool's unused ones (a server keeps those
    between turns: sandbox/docker/ready_pool.py)."""
    api = engine_or_skip()
    owner = server_id(data_dir)
    found = api.containers(all=not running_only, filters={"label": f"uhp.server={owner}"})
    return [c for c in found if ready_slots or not is_ready_slot(c)]


def is_ready_slot(container: dict[str, Any]) -> bool:
    """A ready pool's container no turn has taken yet (named so until one does)."""
    from uhp_server.sandbox.docker.container import SLOT_NAME_PREFIX

    return any(name.startswith("/" + SLOT_NAME_PREFIX) for name in container["Names"])


def runs_turn(container: dict[str, Any], response_id: str) -> bool:
    """Whether `container` (a summary of the engine's list) runs turn `response_id`: labelled
    with it, or a ready pool's container (made before its turn) named after it."""
    named = f"/uhp-{response_id}" in container["Names"]
    return named or container["Labels"].get("uhp.response") == response_id
