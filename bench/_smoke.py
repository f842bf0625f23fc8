"""The smoke mode every benchmark script shares (`--smoke`), so that CI runs each one
(tests/test_bench_smoke.py) and an interface change that breaks a benchmark fails there.

A smoke run shrinks a script's sizes and rounds to the least that still takes every path it
measures, and never holds a target: a missed target exits 0, an exception does not. A module
of bench/ whose name starts with `_` is a part the scripts share, not a script.

Something a script needs and this machine lacks (a Docker engine, gVisor, PostgreSQL, haproxy,
LiteLLM) is left out loudly, with a line starting with LEFT_OUT, and the run goes on without
it; unless the caller requires it (REQUIRE_ENV, a comma-separated list of the names below:
the test sets it to what it found on the machine), when the script exits 3. A script that
cannot run at all without one declares it in a module-level literal, e.g.
`NEEDS = ("postgresql",)`: the test runs it in the pass that has it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

REQUIRE_ENV = "UHP_BENCH_REQUIRE"
LEFT_OUT = "*** BENCH LEFT OUT:"
MISSING_REQUIRED = 3

# The names a script declares in its NEEDS and a caller lists in REQUIRE_ENV.
DOCKER = "docker"  # an engine answering, and the docker CLI
GVISOR = "gvisor"  # that engine with the runsc runtime
POSTGRESQL = "postgresql"  # the local cluster and role of scripts/postgres.sh
HAPROXY = "haproxy"  # Debian's haproxy (scripts/haproxy.sh)
LITELLM = "litellm"  # a scratch venv with LiteLLM in it (bench/translation_compare.py)
KNOWN = frozenset({DOCKER, GVISOR, POSTGRESQL, HAPROXY, LITELLM})


def add_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI's run: the smallest sizes that still take every path, no target held",
    )


def shrink(args: argparse.Namespace, **smallest: object) -> argparse.Namespace:
    """With --smoke, each option named set to its smallest value (a misspelt name fails: the
    smoke run must not silently keep a full size)."""
    if args.smoke:
        for name, value in smallest.items():
            if not hasattr(args, name):
                raise AttributeError(f"--smoke shrinks an option the script lacks: {name}")
            setattr(args, name, value)
    return args


def required() -> frozenset[str]:
    names = frozenset(n.strip() for n in os.environ.get(REQUIRE_ENV, "").split(",") if n.strip())
    unknown = names - KNOWN
    if unknown:
        raise SystemExit(f"{REQUIRE_ENV} names {sorted(unknown)}; known: {sorted(KNOWN)}")
    return names


def left_out(thing: str, part: str, why: str) -> None:
    """Say loudly that `part` is left out for want of `thing`; exit when it is required."""
    if thing not in KNOWN:
        raise ValueError(f"unknown need {thing!r}")
    print(f"\n{LEFT_OUT} {thing}: {part} ({why}) ***\n", file=sys.stderr, flush=True)
    if thing in required():
        print(f"{thing} is required here ({REQUIRE_ENV}): failing", file=sys.stderr)
        raise SystemExit(MISSING_REQUIRED)


def docker_absent() -> str:
    """Why the docker parts cannot run here (no docker CLI, no engine answering), or ""."""
    if shutil.which("docker") is None:
        return "no docker CLI on the PATH"
    try:
        from uhp_server.sandbox.docker.sandbox import engine_client

        engine_client().ping()
    except Exception as exc:  # whatever the SDK raises, the engine is not there
        return f"no engine answers: {type(exc).__name__}: {exc}"
    return ""


def postgresql_absent() -> str:
    """Why the local cluster (tests/support/postgres.py's ADMIN_URL) cannot be used, or ""."""
    import psycopg

    from tests.support.postgres import ADMIN_URL

    try:
        psycopg.connect(ADMIN_URL, connect_timeout=5).close()
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {str(exc).strip()[:200]}; bash scripts/postgres.sh starts it"
    return ""


@contextlib.contextmanager
def postgresql_databases(part: str) -> Iterator[Callable[[str], str] | None]:
    """Fresh databases on the local cluster for `part` of a bench: yields a function giving
    the URL of a new, migrated database per name (all dropped at the end), or None when the
    cluster cannot be used, which is said loudly (`left_out`)."""
    why = postgresql_absent()
    if why:
        left_out(POSTGRESQL, part, why)
        yield None
        return
    from tests.support.postgres import Databases

    databases = Databases()
    try:
        with tempfile.TemporaryDirectory(prefix="uhp-bench-postgresql-") as scratch:
            yield lambda name: databases.url_for(Path(scratch) / name)
    finally:
        databases.drop_all()


def haproxy_absent() -> str:
    """Why no haproxy can run the replicas' balancer (tests/support/replicas.py), or ""."""
    from tests.support.replicas import haproxy_binary

    try:
        haproxy_binary()
    except RuntimeError as exc:
        return str(exc)
    return ""


def gvisor_absent() -> str:
    """Why the docker sandbox cannot run in gVisor here, or ""."""
    why = docker_absent()
    if why:
        return why
    from uhp_server.sandbox.docker.runtimes import GVISOR, engine_runtimes
    from uhp_server.sandbox.docker.sandbox import engine_client

    if GVISOR not in engine_runtimes(engine_client()):
        return "the engine has no runtime runsc; bash scripts/docker-engine.sh registers it"
    return ""


# Where bench/translation_compare.py looks for LiteLLM unless told (its docstring says how to
# make it): a scratch venv, never the project's.
LITELLM_PYTHON = "/tmp/litellm-venv/bin/python"


def litellm_absent(python: str = LITELLM_PYTHON) -> str:
    """Why LiteLLM cannot run with `python`, or ""."""
    try:
        subprocess.run([python, "-c", "import litellm"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"{python} cannot import litellm ({type(exc).__name__})"
    return ""
